package console

import (
	"fmt"
	"slices"
	"time"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// sameChangeWithin is how far apart two replicas' reports of one change
// may be: each replica probes a backend and takes a reload on its own.
const sameChangeWithin = time.Minute

// mergeHealthEvents is the replicas' health events in time order, each
// change once. Every replica reports what it saw, so one change (a
// backend going down, a reload) comes once from each; a replica's own
// events are each a change of their own, however close (a backend that
// fails, recovers and fails again within a minute). So an event is
// dropped only as another replica's report of an event kept: the same
// backend, state and detail, within sameChangeWithin, from a replica that
// has not yet reported that event.
func mergeHealthEvents(parts []*aggregatorv1.GetTrafficResponse) []*aggregatorv1.HealthEvent {
	type reported struct {
		event   *aggregatorv1.HealthEvent
		replica int
	}
	var events []reported
	for i, p := range parts {
		for _, e := range p.GetHealthEvents() {
			events = append(events, reported{e, i})
		}
	}
	slices.SortStableFunc(events, func(a, b reported) int { return a.event.GetTime().AsTime().Compare(b.event.GetTime().AsTime()) })
	type keptEvent struct {
		at time.Time
		// by is the replicas that reported it: the one it was kept from
		// and those whose report of it was dropped.
		by map[int]bool
	}
	kept := map[string][]*keptEvent{}
	var out []*aggregatorv1.HealthEvent
	for _, r := range events {
		e, at := r.event, r.event.GetTime().AsTime()
		k := e.GetBackend() + "\x00" + e.GetState() + "\x00" + e.GetDetail()
		same := slices.IndexFunc(kept[k], func(c *keptEvent) bool { return !c.by[r.replica] && at.Sub(c.at) < sameChangeWithin })
		if same >= 0 {
			kept[k][same].by[r.replica] = true
			continue
		}
		kept[k] = append(kept[k], &keptEvent{at: at, by: map[int]bool{r.replica: true}})
		out = append(out, e)
	}
	return out
}

// healthLanes draws each backend's hour from its changes: the state it
// was in before the first (the change's previous_state), else the one it
// is in now, then each change's; reloads and quarantines as marks.
func healthLanes(backends []*aggregatorv1.Backend, events []*aggregatorv1.HealthEvent, from, to time.Time) []healthLane {
	span := to.Sub(from)
	if span <= 0 {
		return nil
	}
	x := func(t time.Time) float64 { return chartW * float64(max(t.Sub(from), 0)) / float64(span) }
	var lanes []healthLane
	for _, b := range backends {
		lane := healthLane{Backend: b.GetName(), Now: healthNames[b.GetHealth()]}
		state, at := lane.Now, from
		var changes []*aggregatorv1.HealthEvent
		for _, e := range events {
			switch {
			case e.GetBackend() == "" && e.GetState() == "reload":
				lane.Marks = append(lane.Marks, mark{X: x(e.GetTime().AsTime()), Kind: "reload", Title: e.GetTime().AsTime().UTC().Format("15:04:05") + " reload: " + e.GetDetail()})
			case e.GetBackend() != b.GetName():
			case e.GetState() == "quarantine":
				lane.Marks = append(lane.Marks, mark{X: x(e.GetTime().AsTime()), Kind: "quarantine", Title: e.GetTime().AsTime().UTC().Format("15:04:05") + " " + e.GetDetail()})
			default:
				changes = append(changes, e)
			}
		}
		if len(changes) > 0 && changes[0].GetPreviousState() != "" {
			state = changes[0].GetPreviousState()
		}
		for _, e := range changes {
			t := e.GetTime().AsTime()
			lane.Segments = append(lane.Segments, segment{X: x(at), W: x(t) - x(at), State: state,
				Title: fmt.Sprintf("%s from %s", state, at.UTC().Format("15:04:05"))})
			state, at = e.GetState(), t
		}
		lane.Segments = append(lane.Segments, segment{X: x(at), W: chartW - x(at), State: state, Title: fmt.Sprintf("%s from %s", state, at.UTC().Format("15:04:05"))})
		lanes = append(lanes, lane)
	}
	return lanes
}
