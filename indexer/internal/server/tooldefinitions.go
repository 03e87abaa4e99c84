package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/services/tooldigest"

	"github.com/switchboard-mcp/switchboard/indexer/internal/approvals"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Pinned tool definitions (docs/operations.md): aggregators record the
// digest of each backend tool's definition, operators approve changed
// ones.

const (
	// maxToolDefinitionsPerRequest bounds one RecordToolDefinitions: with
	// the name bounds below a request stays under 9 MiB, within the
	// server's 16 MiB message bound. Aggregators send larger catalogs in
	// several requests.
	maxToolDefinitionsPerRequest = 10_000
	maxToolBackendBytes          = 256
	maxToolNameBytes             = 512
	// A definition sent for review is at most 64 KiB, and a request's
	// together at most 8 MiB.
	maxToolDefinitionBytes        = 64 << 10
	maxToolDefinitionRequestBytes = 8 << 20
	defaultToolDefinitionPage     = 100
	maxToolDefinitionPage         = 1000
	// approvalsPerMessage bounds one WatchToolDefinitions message.
	approvalsPerMessage = 1000
)

var (
	// errOperatorOnly refuses an operator's RPC to any other caller
	// (methodAccess).
	errOperatorOnly = errors.New("operator credentials only")
	// errApprovalsBehind ends a WatchToolDefinitions stream whose
	// subscriber did not keep up.
	errApprovalsBehind = errors.New("tool approval subscriber fell behind")
)

// RecordToolDefinitions records what an aggregator listed and answers the
// approved digests.
func (s *Server) RecordToolDefinitions(ctx context.Context, req *indexerv1.RecordToolDefinitionsRequest) (*indexerv1.RecordToolDefinitionsResponse, error) {
	err := s.checkReady()
	var digests []store.ToolDefinitionDigest
	if err == nil {
		digests, err = validToolDigests(req.GetTools())
	}
	// A new tool of a backend with tools recorded is pending when the
	// aggregator asks, or when this indexer's configuration says so
	// (aggregator.pinning.newTools review): an aggregator's credential
	// alone cannot record a new tool name approved by being first.
	pendingIfNew := req.GetNewToolsPending() || s.ReviewNewTools != nil && s.ReviewNewTools.Load()
	for i := range digests {
		digests[i].PendingIfNew = pendingIfNew
	}
	var recs []store.ToolDefinition
	if err == nil {
		recs, err = s.Store.RecordToolDefinitions(ctx, digests)
	}
	if err != nil {
		return nil, s.toStatus(ctx, "RecordToolDefinitions", err)
	}
	resp := &indexerv1.RecordToolDefinitionsResponse{Verdicts: make([]*indexerv1.ToolDefinitionVerdict, len(recs))}
	for i, r := range recs {
		// Pending is about the caller's digest: the record's seen digest
		// may already be another replica's.
		resp.Verdicts[i] = &indexerv1.ToolDefinitionVerdict{Backend: r.Backend, Tool: r.Tool, ApprovedDigest: r.ApprovedDigest, Pending: r.ApprovedDigest != digests[i].Digest}
	}
	return resp, nil
}

// validToolDigests checks a request's bounds and forms, and that each
// definition sent for review hashes to its digest (checkDefinitionDigest).
func validToolDigests(tools []*indexerv1.ToolDefinitionDigest) ([]store.ToolDefinitionDigest, error) {
	if len(tools) > maxToolDefinitionsPerRequest {
		return nil, invalidArgument("at most 10,000 tools per request; send more in several")
	}
	type key struct{ backend, tool string }
	seen := make(map[key]bool, len(tools))
	out := make([]store.ToolDefinitionDigest, len(tools))
	defBytes := 0
	for i, t := range tools {
		if err := validToolKey(t.GetBackend(), t.GetTool()); err != nil {
			return nil, err
		}
		if !validSHA256(t.GetDigest()) {
			return nil, invalidArgument("digest must be a lower-case hex SHA-256 (64 characters)")
		}
		if def := t.GetDefinitionJson(); def != "" {
			defBytes += len(def)
			switch {
			case len(def) > maxToolDefinitionBytes:
				return nil, invalidArgument("definition_json must be at most 64 KiB")
			case defBytes > maxToolDefinitionRequestBytes:
				return nil, invalidArgument("the definitions of one request must be at most 8 MiB together; send them in several")
			case def[0] != '{' || !json.Valid([]byte(def)):
				return nil, invalidArgument("definition_json must be a JSON object")
			}
			if err := checkDefinitionDigest(i, t); err != nil {
				return nil, err
			}
		}
		k := key{t.GetBackend(), t.GetTool()}
		if seen[k] {
			return nil, invalidArgument("each (backend, tool) at most once per request")
		}
		seen[k] = true
		out[i] = store.ToolDefinitionDigest{Backend: t.GetBackend(), Tool: t.GetTool(), Digest: t.GetDigest(), Definition: t.GetDefinitionJson()}
	}
	return out, nil
}

// checkDefinitionDigest refuses the definition sent with tools[i] unless
// it hashes to its digest: the digest an aggregator computes of the
// definition as its backend listed it (tooldigest.Digest, of the JSON
// object the aggregator sends, which is that definition, or the tool
// encoded when the list was made in code). Otherwise a credential that
// records digests could show reviewers a harmless text for a harmful
// definition's digest, and the approval of that digest would let the
// harmful one through. The refusal names the tool, never the text.
func checkDefinitionDigest(i int, t *indexerv1.ToolDefinitionDigest) error {
	which := fmt.Sprintf("tools[%d] (backend %q, tool %q)", i, t.GetBackend(), t.GetTool())
	sum, err := tooldigest.Digest([]byte(t.GetDefinitionJson()), nil)
	switch {
	case errors.Is(err, rawjson.ErrDuplicateMember):
		return invalidArgument(which + ": definition_json has no digest: an object in it names a member twice")
	case errors.Is(err, rawjson.ErrTooDeep):
		return invalidArgument(which + fmt.Sprintf(": definition_json has no digest: it nests deeper than %d levels", tooldigest.MaxDefinitionDepth))
	case err != nil:
		return invalidArgument(which + ": definition_json has no digest: it is not a JSON object that can be read one way")
	case sum != t.GetDigest():
		return invalidArgument(which + ": definition_json does not hash to digest; send the definition the digest was computed from " +
			"(docs/operations.md, Pinned tool definitions)")
	}
	return nil
}

// validToolKey bounds the names; PostgreSQL text holds no NUL.
func validToolKey(backend, tool string) error {
	switch {
	case backend == "" || len(backend) > maxToolBackendBytes:
		return invalidArgument("backend must be 1 to 256 bytes")
	case tool == "" || len(tool) > maxToolNameBytes:
		return invalidArgument("tool must be 1 to 512 bytes")
	case !utf8.ValidString(backend) || !utf8.ValidString(tool) || strings.ContainsRune(backend, 0) || strings.ContainsRune(tool, 0):
		return invalidArgument("backend and tool must be UTF-8 without NUL")
	}
	return nil
}

func validSHA256(d string) bool {
	if len(d) != 64 {
		return false
	}
	for _, c := range d {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ApproveToolDefinition approves a tool's latest seen definition, for
// operators only, and tells this replica's aggregators at once.
func (s *Server) ApproveToolDefinition(ctx context.Context, req *indexerv1.ApproveToolDefinitionRequest) (*indexerv1.ApproveToolDefinitionResponse, error) {
	err := s.checkReady()
	if err == nil {
		err = validToolKey(req.GetBackend(), req.GetTool())
	}
	if err == nil && !validSHA256(req.GetDigest()) {
		err = invalidArgument("digest must be a lower-case hex SHA-256 (64 characters), as ListToolDefinitions shows it")
	}
	d := store.ToolDefinitionDigest{Backend: req.GetBackend(), Tool: req.GetTool(), Digest: req.GetDigest()}
	var (
		rec     store.ToolDefinition
		changed bool
	)
	if err == nil {
		caller, _ := svcauth.CallerFrom(ctx)
		rec, changed, err = s.Store.ApproveToolDefinition(ctx, d, caller.Name)
		if err == nil && changed {
			s.Log.InfoContext(ctx, "tool definition approved", "backend", d.Backend, "tool", d.Tool, "digest", d.Digest, "by", caller.Name)
			s.Approvals.Publish(d)
		}
	}
	if err != nil {
		return nil, s.toStatus(ctx, "ApproveToolDefinition", err)
	}
	return &indexerv1.ApproveToolDefinitionResponse{Definition: toolDefinitionProto(rec), Changed: changed}, nil
}

// ListToolDefinitions pages through the records, for operators only. The
// page token is the last key of the previous page.
func (s *Server) ListToolDefinitions(ctx context.Context, req *indexerv1.ListToolDefinitionsRequest) (*indexerv1.ListToolDefinitionsResponse, error) {
	err := s.checkReady()
	size := int(req.GetPageSize())
	switch {
	case size == 0:
		size = defaultToolDefinitionPage
	case size > maxToolDefinitionPage:
		size = maxToolDefinitionPage
	}
	var afterBackend, afterTool string
	if err == nil && req.GetPageToken() != "" {
		afterBackend, afterTool, err = parseToolPageToken(req.GetPageToken())
	}
	var defs []store.ToolDefinition
	if err == nil {
		// One more than the page tells whether another page follows.
		defs, err = s.Store.ListToolDefinitions(ctx, req.GetIncludeApproved(), afterBackend, afterTool, size+1)
	}
	if err != nil {
		return nil, s.toStatus(ctx, "ListToolDefinitions", err)
	}
	resp := &indexerv1.ListToolDefinitionsResponse{}
	if len(defs) > size {
		defs = defs[:size]
		last := defs[size-1]
		resp.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(last.Backend + "\x00" + last.Tool))
	}
	for _, d := range defs {
		resp.Definitions = append(resp.Definitions, toolDefinitionProto(d))
	}
	return resp, nil
}

func parseToolPageToken(tok string) (backend, tool string, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	b, t, ok := strings.Cut(string(raw), "\x00")
	// Its parts reach PostgreSQL as text: UTF-8 without NUL, as every
	// token this RPC returns is.
	if len(tok) > 2048 || err != nil || !ok || !utf8.ValidString(b+t) || strings.ContainsRune(t, 0) {
		return "", "", invalidArgument("page_token is not one this RPC returned")
	}
	return b, t, nil
}

func toolDefinitionProto(d store.ToolDefinition) *indexerv1.ToolDefinition {
	p := &indexerv1.ToolDefinition{
		Backend: d.Backend, Tool: d.Tool, ApprovedDigest: d.ApprovedDigest, SeenDigest: d.SeenDigest, Pending: d.Pending(),
		FirstSeen: timestamppb.New(d.FirstSeen), LastSeen: timestamppb.New(d.LastSeen), ApprovedBy: d.ApprovedBy,
		SeenDefinitionJson: d.SeenDefinition,
	}
	if !d.ApprovedAt.IsZero() {
		p.ApprovedAt = timestamppb.New(d.ApprovedAt)
	}
	return p
}

// WatchToolDefinitions streams approvals: first a resync, then each
// approval as this replica hears of it.
func (s *Server) WatchToolDefinitions(_ *indexerv1.WatchToolDefinitionsRequest, stream indexerv1.IndexerService_WatchToolDefinitionsServer) error {
	ctx := stream.Context()
	if err := s.checkReady(); err != nil {
		return s.toStatus(ctx, "WatchToolDefinitions", err)
	}
	if caller, _ := svcauth.CallerFrom(ctx); !caller.Operator {
		release, err := s.approvalWatchers.Acquire(caller.Name)
		if err != nil {
			return s.toStatus(ctx, "WatchToolDefinitions", err)
		}
		defer release()
	}
	events, listening, cancel := s.Approvals.Subscribe()
	defer cancel()
	// Subscribed first: an approval from now on is on the channel, one
	// before is found by the record the resync asks for. The first resync
	// goes out once this replica listens, so that after it no approval is
	// missed; until then the stream stays silent.
	if listening {
		if err := stream.Send(&indexerv1.WatchToolDefinitionsResponse{Resync: true}); err != nil {
			return err
		}
	}
	for {
		var e approvals.Event
		var ok bool
		select {
		case <-ctx.Done():
			// The caller went away or its deadline passed: say which, rather
			// than end the stream as if it had completed.
			return s.toStatus(ctx, "WatchToolDefinitions", ctx.Err())
		case <-s.Stopping:
			return nil
		case e, ok = <-events:
		}
		if !ok {
			return s.toStatus(ctx, "WatchToolDefinitions", errApprovalsBehind)
		}
		msg := &indexerv1.WatchToolDefinitionsResponse{}
		for {
			if e.Resync {
				msg.Resync = true
			} else {
				msg.Approvals = append(msg.Approvals, &indexerv1.ToolDefinitionDigest{Backend: e.Approval.Backend, Tool: e.Approval.Tool, Digest: e.Approval.Digest})
			}
			if len(msg.Approvals) >= approvalsPerMessage {
				break
			}
			select {
			case e, ok = <-events:
				if ok {
					continue
				}
			default:
			}
			break
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
}
