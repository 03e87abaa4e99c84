package server

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/traffic"
	"github.com/switchboard-mcp/switchboard/services/audit"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// WithTraffic counts every tool call's outcome in t for the console's
// traffic page (GetTraffic), naming this replica replica there.
func (s *Server) WithTraffic(t *traffic.Recorder, replica string) *Server {
	s.traffic, s.replica = t, replica
	return s
}

// recordTraffic counts one admission of a tool call, with the outcome and
// backend the trail records it with, under the tool's name in the whole
// catalog, which the page counts it under in every server (as the policy
// and the limits do; the snapshot it was admitted under names it).
func (s *Server) recordTraffic(r admission, a *admitted, start time.Time, backend string, outcome audit.Outcome) {
	if s.traffic == nil || r.trail != audit.KindToolCall {
		return
	}
	tool := r.key
	if a != nil && a.snap != nil {
		tool = a.snap.PolicyName(r.kind, r.key)
	}
	s.traffic.Call(r.server, tool, backend, trafficOutcome(outcome), time.Since(start))
}

func trafficOutcome(o audit.Outcome) string {
	switch o {
	case audit.OutcomeOK:
		return traffic.OutcomeOK
	case audit.OutcomeRateLimited:
		return traffic.OutcomeRateLimited
	case audit.OutcomeDenied, audit.OutcomeNotFound, audit.OutcomeInvalid, audit.OutcomeCancelled:
		return traffic.OutcomeRefused
	}
	return traffic.OutcomeError
}

// GetTraffic reports this replica's last hour; operators only.
func (s *Server) GetTraffic(ctx context.Context, _ *aggregatorv1.GetTrafficRequest) (*aggregatorv1.GetTrafficResponse, error) {
	if caller, _ := svcauth.CallerFrom(ctx); !caller.Operator {
		return nil, s.fail(ctx, "GetTraffic", errOperatorsOnly)
	}
	resp := &aggregatorv1.GetTrafficResponse{Replica: s.replica, LatencyBucketMs: traffic.LatencyBucketsMs()}
	if s.traffic == nil {
		return resp, nil
	}
	minutes, events := s.traffic.Snapshot()
	for _, m := range minutes {
		tm := &aggregatorv1.TrafficMinute{Start: timestamppb.New(m.Start)}
		for dim, byName := range m.Cells {
			for name, c := range byName {
				tm.Cells = append(tm.Cells, &aggregatorv1.TrafficCell{Dimension: dim, Name: name, Calls: c.Calls, Errors: c.Errors,
					RateLimited: c.RateLimited, Refused: c.Refused, LatencyHistogram: c.Histogram(), LatencyOverflow: c.Overflow()})
			}
		}
		resp.Minutes = append(resp.Minutes, tm)
	}
	for _, e := range events {
		resp.HealthEvents = append(resp.HealthEvents, &aggregatorv1.HealthEvent{Time: timestamppb.New(e.Time), Backend: e.Backend, State: e.State, Detail: e.Detail, PreviousState: e.Previous})
	}
	return resp, nil
}
