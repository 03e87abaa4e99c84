package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/audit"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// The audit trail's table (docs/operations.md, "Audit trail"): the
// gateways and aggregators ship their events here, operators query them.

const (
	// maxAuditEventsPerRequest bounds one RecordAuditEvents; the writers
	// send batches of at most 256.
	maxAuditEventsPerRequest = 1000
	defaultAuditPage         = 100
	maxAuditPage             = 1000
	// One event's bounds are the table's, in services/audit, where the
	// indexer sink fits events to them before it ships them.
	maxAuditFieldBytes     = audit.MaxFieldBytes
	maxAuditGroups         = audit.MaxGroups
	maxAuditGroupBytes     = audit.MaxGroupBytes
	maxAuditArgumentsBytes = audit.MaxArgumentsBytes
)

// errAuditDisabled answers both RPCs of an indexer without
// audit.database.enabled.
var errAuditDisabled = errors.New("the audit table is off on this indexer: set audit.database.enabled")

// RecordAuditEvents stores a batch of events sent by a gateway or an
// aggregator, each with the credential that sent it and how that
// authenticated, once every event is one the credential may write
// (auditWritable); otherwise the whole batch is refused and counted.
func (s *Server) RecordAuditEvents(ctx context.Context, req *indexerv1.RecordAuditEventsRequest) (*indexerv1.RecordAuditEventsResponse, error) {
	caller, _ := svcauth.CallerFrom(ctx)
	events, err := s.validAuditEvents(req.GetEvents())
	if err == nil {
		if refused := auditWritable(caller, events); refused != nil {
			s.Metrics.auditEventsRefused(caller.Name, refused.reason, len(events))
			err = refused
		}
	}
	if err == nil {
		err = s.AuditEvents.RecordAuditEvents(ctx, events, store.AuditWriter{Credential: caller.Name, Identity: caller.Identity})
	}
	if err != nil {
		return nil, s.toStatus(ctx, "RecordAuditEvents", err)
	}
	return &indexerv1.RecordAuditEventsResponse{Recorded: uint32(len(events))}, nil
}

// auditRefusal is the first event of a RecordAuditEvents batch that its
// credential may not write; the whole batch is refused with it
// (PERMISSION_DENIED, ERROR_REASON_AUDIT_EVENT_NOT_ALLOWED). Storing the
// rest would keep a batch that is partly forged, and the writer would not
// learn which of its events were lost: refused whole, the writer counts
// the batch as dropped (switchboard_audit_events_dropped_total, reason
// sink_error) and the indexer as refused
// (switchboard_indexer_audit_events_refused_total).
type auditRefusal struct {
	index int
	// reason labels the metric: credential (bound to no service), service
	// (another service's event), kind (a kind its service does not
	// record), subject (another principal's, from a credential that may
	// not assert principals).
	reason string
	msg    string
}

func (e *auditRefusal) Error() string { return fmt.Sprintf("event %d: %s", e.index, e.msg) }

// auditWritable returns nil when caller may write every event, or the
// refusal of the first it may not. A credential writes the events of the
// service it is bound to (svcauth.Caller.AuditService, from
// serviceAuth.credentials[].auditService or the credential's name), of
// the kinds that service records (audit.Emits, the one table of them);
// one that may not assert principals, only events of its own principal,
// as it may act for no other (svcauth.Resolve).
func auditWritable(caller svcauth.Caller, events []audit.Event) *auditRefusal {
	for i, e := range events {
		switch {
		case caller.AuditService == "":
			return &auditRefusal{index: i, reason: "credential", msg: fmt.Sprintf(
				"service credential %s may write no audit events: it is bound to no service (serviceAuth.credentials[].auditService)", caller.Name)}
		case e.Service != caller.AuditService:
			return &auditRefusal{index: i, reason: "service", msg: fmt.Sprintf(
				"service %q: service credential %s writes the %s's audit events only", e.Service, caller.Name, caller.AuditService)}
		case !audit.Emits(e.Service, e.Kind):
			return &auditRefusal{index: i, reason: "kind", msg: fmt.Sprintf("kind %q: the %s records no such events", e.Kind, e.Service)}
		case !caller.AssertPrincipals && !ownPrincipal(caller, e):
			return &auditRefusal{index: i, reason: "subject", msg: fmt.Sprintf(
				"service credential %s may not assert principals: its events name its own principal only", caller.Name)}
		}
	}
	return nil
}

// ownPrincipal reports whether e names the principal of caller, one that
// may not assert principals: its subject, and its groups in any order
// (svcauth.Resolve); not another's, nor the anonymous principal's (an
// event naming none, for a credential that has a subject).
func ownPrincipal(caller svcauth.Caller, e audit.Event) bool {
	if e.Subject != caller.Bound.GetSubject() {
		return false
	}
	_, err := svcauth.Resolve(caller, &commonv1.Principal{Subject: e.Subject, Groups: e.Groups})
	return err == nil
}

func (s *Server) validAuditEvents(in []*indexerv1.AuditEvent) ([]audit.Event, error) {
	if s.AuditEvents == nil {
		return nil, errAuditDisabled
	}
	if err := s.checkReady(); err != nil {
		return nil, err
	}
	if len(in) > maxAuditEventsPerRequest {
		return nil, invalidArgument(fmt.Sprintf("too many events (at most %d per request)", maxAuditEventsPerRequest))
	}
	out := make([]audit.Event, len(in))
	latest := time.Now().Add(maxAuditClockSkew)
	for i, p := range in {
		e, err := auditEventFromProto(p)
		if err == nil && e.Time.After(latest) {
			// An event dated ahead would sort first in every newest-first
			// query and outlive the retention that follows its time.
			err = fmt.Errorf("time is more than %v ahead of the indexer's clock", maxAuditClockSkew)
		}
		if err != nil {
			return nil, invalidArgument(fmt.Sprintf("event %d: %v", i, err))
		}
		out[i] = e
	}
	return out, nil
}

// maxAuditClockSkew is how far ahead of the indexer's clock an event's
// time may be: the writers' clocks differ a little, never by minutes.
const maxAuditClockSkew = 5 * time.Minute

func auditEventFromProto(p *indexerv1.AuditEvent) (audit.Event, error) {
	e := audit.Event{Schema: audit.Schema, Time: p.GetTime().AsTime(), Service: p.GetService(), Kind: audit.Kind(p.GetKind()),
		Outcome: audit.Outcome(p.GetOutcome()), Subject: p.GetSubject(), Groups: p.GetGroups(), Server: p.GetServer(),
		Tool: p.GetTool(), Resource: p.GetResource(), Prompt: p.GetPrompt(), Backend: p.GetBackend(), LatencyMS: p.GetLatencyMs(),
		TraceID: p.GetTraceId(), Session: p.GetSession(), ArgumentsSHA256: p.GetArgumentsSha256(), Detail: p.GetDetail(),
		Caller: p.GetCaller(), Via: p.GetVia()}
	if p.GetTime() == nil {
		return e, errors.New("time is required")
	}
	if p.GetTime().CheckValid() != nil {
		return e, errors.New("time is not a valid timestamp (years 1 to 9999)")
	}
	if e.Service == "" || e.Kind == "" || e.Outcome == "" {
		return e, errors.New("service, kind and outcome are required")
	}
	fields := []string{e.Service, string(e.Kind), string(e.Outcome), e.Subject, e.Server, e.Tool, e.Resource, e.Prompt, e.Backend,
		e.TraceID, e.Session, e.ArgumentsSHA256, e.Detail, e.Caller, e.Via}
	for _, f := range fields {
		if len(f) > maxAuditFieldBytes || !utf8.ValidString(f) || strings.IndexByte(f, 0) >= 0 {
			return e, fmt.Errorf("a field is over %d bytes, not UTF-8 or holds NUL", maxAuditFieldBytes)
		}
	}
	if len(e.Groups) > maxAuditGroups {
		return e, fmt.Errorf("too many groups (at most %d)", maxAuditGroups)
	}
	for _, g := range e.Groups {
		if len(g) > maxAuditGroupBytes || !utf8.ValidString(g) || strings.IndexByte(g, 0) >= 0 {
			return e, fmt.Errorf("a group is over %d bytes, not UTF-8 or holds NUL", maxAuditGroupBytes)
		}
	}
	if a := p.GetArgumentsJson(); a != "" {
		if len(a) > maxAuditArgumentsBytes || !utf8.ValidString(a) || strings.IndexByte(a, 0) >= 0 {
			return e, fmt.Errorf("arguments_json is over %d bytes, not UTF-8 or holds NUL", maxAuditArgumentsBytes)
		}
		e.Arguments = []byte(a)
	}
	return e, nil
}

// QueryAuditEvents pages through the stored trail, for operators.
func (s *Server) QueryAuditEvents(ctx context.Context, req *indexerv1.QueryAuditEventsRequest) (*indexerv1.QueryAuditEventsResponse, error) {
	resp, err := s.queryAuditEvents(ctx, req)
	return resp, s.toStatus(ctx, "QueryAuditEvents", err)
}

func (s *Server) queryAuditEvents(ctx context.Context, req *indexerv1.QueryAuditEventsRequest) (*indexerv1.QueryAuditEventsResponse, error) {
	if s.AuditEvents == nil {
		return nil, errAuditDisabled
	}
	if err := s.checkReady(); err != nil {
		return nil, err
	}
	size, err := pageSize(req.GetPageSize(), defaultAuditPage, maxAuditPage)
	if err != nil {
		return nil, err
	}
	q := store.AuditQuery{Subject: req.GetSubject(), Tool: req.GetTool(), Server: req.GetServer(), Kind: req.GetKind(),
		Outcome: req.GetOutcome(), Backend: req.GetBackend()}
	for _, f := range []string{q.Subject, q.Tool, q.Server, q.Kind, q.Outcome, q.Backend} {
		if len(f) > maxAuditFieldBytes || !utf8.ValidString(f) || strings.IndexByte(f, 0) >= 0 {
			return nil, invalidArgument(fmt.Sprintf("a filter is over %d bytes, not UTF-8 or holds NUL", maxAuditFieldBytes))
		}
	}
	for _, t := range []*timestamppb.Timestamp{req.GetSince(), req.GetUntil()} {
		if t != nil && t.CheckValid() != nil {
			return nil, invalidArgument("since and until must be valid timestamps (years 1 to 9999)")
		}
	}
	if t := req.GetSince(); t != nil {
		q.Since = t.AsTime()
	}
	if t := req.GetUntil(); t != nil {
		q.Until = t.AsTime()
	}
	if tok := req.GetPageToken(); tok != "" {
		key, err := parseAuditToken(tok)
		if err != nil {
			return nil, err
		}
		q.After = &key
	}
	recs, err := s.AuditEvents.QueryAuditEvents(ctx, q, size)
	if err != nil {
		return nil, err
	}
	resp := &indexerv1.QueryAuditEventsResponse{Events: make([]*indexerv1.AuditEvent, len(recs))}
	for i := range recs {
		p := audit.ToProto(&recs[i].Event)
		p.Id, p.RecordedBy, p.RecordedByIdentity = recs[i].ID, recs[i].RecordedBy, recs[i].RecordedByIdentity
		resp.Events[i] = p
	}
	if len(recs) == size {
		last := recs[len(recs)-1]
		resp.NextPageToken = auditToken(store.AuditKey{Time: last.Time, ID: last.ID})
	}
	return resp, nil
}

// An audit page token is the key of the page's last event,
// "<unix microseconds>.<id>" in unpadded URL-safe base64.
func auditToken(k store.AuditKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(k.Time.UnixMicro(), 10) + "." + strconv.FormatInt(k.ID, 10)))
}

func parseAuditToken(tok string) (store.AuditKey, error) {
	bad := invalidArgument("invalid page_token")
	if len(tok) > 64 {
		return store.AuditKey{}, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return store.AuditKey{}, bad
	}
	us, id, ok := strings.Cut(string(raw), ".")
	micros, err1 := strconv.ParseInt(us, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if !ok || err1 != nil || err2 != nil || n <= 0 || !cursorTime(micros) {
		return store.AuditKey{}, bad
	}
	return store.AuditKey{Time: time.UnixMicro(micros).UTC(), ID: n}, nil
}
