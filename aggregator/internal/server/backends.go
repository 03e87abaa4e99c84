package server

import (
	"context"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

var apiHealth = map[backend.State]aggregatorv1.BackendHealth{
	backend.Unknown:   aggregatorv1.BackendHealth_BACKEND_HEALTH_UNKNOWN,
	backend.Healthy:   aggregatorv1.BackendHealth_BACKEND_HEALTH_HEALTHY,
	backend.Degraded:  aggregatorv1.BackendHealth_BACKEND_HEALTH_DEGRADED,
	backend.Unhealthy: aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY,
}

// ListBackends reports every backend in name order. With a principal in
// the request, or for a caller that may not assert principals, only the
// backends the principal sees something of are listed, and each with the
// counts of what it sees: the backend's own would tell it how much the
// policy and the server's filters hide.
//
// A backend's URL and the text of its last failure are for operators
// (serviceAuth.credentials[].operator): the text names URLs, hosts and
// ports, and may quote the backend's own answer. Every other caller gets
// no URL and, for a failing backend, the failure's generic reason
// ("backend unreachable", "backend timed out", ...).
func (s *Server) ListBackends(ctx context.Context, req *aggregatorv1.ListBackendsRequest) (*aggregatorv1.ListBackendsResponse, error) {
	snap, _, err := s.e.ServerSnapshot(req.GetServer())
	if err != nil {
		return nil, s.fail(ctx, "ListBackends", err)
	}
	var visible map[string]*[len(catalog.Kinds)]uint32
	c, _ := svcauth.CallerFrom(ctx)
	switch {
	case req.GetPrincipal() != nil || !c.AssertPrincipals:
		visible = visibleBackends(s.e.View(snap, svcauth.PrincipalFrom(ctx)))
	case req.GetServer() != "":
		// A trusted caller asking about a server: the backends it serves
		// something of.
		visible = visibleBackends(s.e.FullView(snap))
	}
	out := &aggregatorv1.ListBackendsResponse{CatalogVersion: snap.Version}
	for _, b := range s.e.Backends() {
		st := b.Status()
		counts := new([len(catalog.Kinds)]uint32)
		counts[catalog.KindTools], counts[catalog.KindResources] = uint32(st.Tools), uint32(st.Resources)
		counts[catalog.KindResourceTemplates], counts[catalog.KindPrompts] = uint32(st.ResourceTemplates), uint32(st.Prompts)
		if visible != nil {
			if counts = visible[b.Name()]; counts == nil {
				continue
			}
		}
		msg := &aggregatorv1.Backend{
			Name:                  b.Name(),
			Health:                apiHealth[st.State],
			ProtocolVersion:       st.ProtocolVersion,
			ToolCount:             counts[catalog.KindTools],
			ResourceCount:         counts[catalog.KindResources],
			ResourceTemplateCount: counts[catalog.KindResourceTemplates],
			PromptCount:           counts[catalog.KindPrompts],
		}
		switch {
		case c.Operator:
			msg.Url, msg.LastError = b.ShownURL(), st.LastError
		case st.LastError != "":
			msg.LastError = st.Failure.Reason()
		}
		if !st.LastCheck.IsZero() {
			msg.LastCheck = timestamppb.New(st.LastCheck)
		}
		if st.Latency > 0 {
			msg.LastLatency = durationpb.New(st.Latency)
		}
		out.Backends = append(out.Backends, msg)
	}
	if c.Operator {
		for _, cf := range snap.AllConflicts() {
			cf = cf.Cut()
			out.Conflicts = append(out.Conflicts, &aggregatorv1.CatalogConflict{Kind: cf.Kind.String(), Name: cf.Name,
				Backends: cf.Backends, Winner: cf.Winner, Overlaps: cf.Overlaps})
		}
	}
	return out, nil
}

// visibleBackends counts, per backend, the items of each kind v holds.
func visibleBackends(v *catalog.View) map[string]*[len(catalog.Kinds)]uint32 {
	m := map[string]*[len(catalog.Kinds)]uint32{}
	snap := v.Snapshot
	count := func(k catalog.Kind, backend string) {
		if m[backend] == nil {
			m[backend] = new([len(catalog.Kinds)]uint32)
		}
		m[backend][k]++
	}
	for _, i := range v.Items(catalog.KindTools) {
		count(catalog.KindTools, snap.Tools[i].Backend)
	}
	for _, i := range v.Items(catalog.KindResources) {
		count(catalog.KindResources, snap.Resources[i].Backend)
	}
	for _, i := range v.Items(catalog.KindResourceTemplates) {
		count(catalog.KindResourceTemplates, snap.Templates[i].Backend)
	}
	for _, i := range v.Items(catalog.KindPrompts) {
		count(catalog.KindPrompts, snap.Prompts[i].Backend)
	}
	return m
}
