package engine

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/authz"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// Errors of routing; internal/server turns them into statuses.
var (
	// ErrNotFound: no such item in the principal's view. Denied items get
	// it too, so callers cannot tell them from missing ones.
	ErrNotFound = errors.New("not found")
	// ErrBackendDown: the owning backend is unhealthy; nothing was sent.
	ErrBackendDown = errors.New("backend unavailable")
	// ErrDenied: the item exists but the policy denies it to the
	// principal. It is an ErrNotFound (errors.Is), so the caller is
	// answered exactly as for a missing item; only the audit trail tells
	// them apart.
	ErrDenied = fmt.Errorf("%w (denied)", ErrNotFound)
)

// View returns p's view of snap.
func (e *Engine) View(snap *catalog.Snapshot, p *commonv1.Principal) *catalog.View {
	az := e.authorizer()
	if az == nil {
		return snap.View("", nil)
	}
	groups := slices.Clone(p.GetGroups())
	slices.Sort(groups)
	groups = slices.Compact(groups)
	ap := authz.Principal{Subject: p.GetSubject(), Groups: groups}
	// Principal keys start with "user:" so no principal can ever be handed
	// the unfiltered view cached under fullViewKey; their fields are
	// length-prefixed, so that no subject or group can spell another
	// principal's key (a subject "alice\x00admins" with no groups is not
	// alice in admins).
	var b strings.Builder
	b.WriteString("user:")
	writeField(&b, ap.Subject)
	for _, g := range groups {
		writeField(&b, g)
	}
	return snap.View(b.String(), func(k catalog.Kind, key, backend string) bool {
		return allowed(az, ap, k, snap.PolicyName(k, key), backend, snap.Server)
	})
}

// fullViewKey caches the unfiltered view.
const fullViewKey = "all"

// FullView is the unfiltered view (for trusted watchers of all changes).
func (e *Engine) FullView(snap *catalog.Snapshot) *catalog.View {
	return snap.View(fullViewKey, nil)
}

// allowed is the one authorization decision behind lists, Discover and
// calls, under policy az, for an item of the catalog of server, named as
// the policy knows it (catalog.Snapshot.PolicyName).
func allowed(az *authz.Authorizer, p authz.Principal, k catalog.Kind, key, backend, server string) bool {
	switch k {
	case catalog.KindTools:
		return az.Allowed(p, authz.ActionCallTool, authz.TypeTool, key, backend, server)
	case catalog.KindPrompts:
		return az.Allowed(p, authz.ActionGetPrompt, authz.TypePrompt, key, backend, server)
	default:
		return az.Allowed(p, authz.ActionReadResource, authz.TypeResource, key, backend, server)
	}
}

// mayUse decides one item for a call. The decision is cached in the
// snapshot per (principal, kind, key, backend): a snapshot is immutable,
// and so is the policy under it (a new policy comes with a new snapshot,
// policy.go), so a repeated call of the same tool by the same principal
// costs a map lookup instead of a Cedar evaluation. The backend is part
// of the key because the policy sees it (Backend::"<name>" is the item's
// parent) and one URI may be decided under two: its owner's, and that of
// a template read whose decoded path it is (server.route).
func (e *Engine) mayUse(snap *catalog.Snapshot, p *commonv1.Principal, k catalog.Kind, key, backend string) bool {
	az := e.authorizer()
	if az == nil {
		return true
	}
	return snap.Decide(decisionKey(p, k, key, backend), func() bool {
		return allowed(az, authz.Principal{Subject: p.GetSubject(), Groups: p.GetGroups()}, k, snap.PolicyName(k, key), backend, snap.Server)
	})
}

// decisionKey names one decision: the principal's subject and groups (in
// the order given: another order is only another cache entry), the kind,
// the key and the backend. Lengths are prefixed, so no two decisions
// share a key.
func decisionKey(p *commonv1.Principal, k catalog.Kind, key, backend string) string {
	var b strings.Builder
	n := len(p.GetSubject()) + len(key) + len(backend) + 12
	for _, g := range p.GetGroups() {
		n += len(g) + 4
	}
	b.Grow(n)
	b.WriteByte(byte('0' + k))
	writeField(&b, key)
	writeField(&b, backend)
	writeField(&b, p.GetSubject())
	for _, g := range p.GetGroups() {
		writeField(&b, g)
	}
	return b.String()
}

// writeField writes s to b after its length: fields so written never run
// into each other, whatever bytes they hold.
func writeField(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

// Owner checks that principal p may use the item of kind k with key, owned
// in snap by backendName ("" when snap has no such item), and returns that
// backend, failing fast when it is down. Denied and missing are the same
// ErrNotFound.
func (e *Engine) Owner(snap *catalog.Snapshot, p *commonv1.Principal, k catalog.Kind, key, backendName string) (*backend.Client, error) {
	if backendName == "" {
		return nil, ErrNotFound
	}
	if !e.mayUse(snap, p, k, key, backendName) {
		return nil, ErrDenied
	}
	// An app's page that its backend does not list is the tools' that name
	// it: a caller who may call none of them may not read it either.
	if tools := snap.UIOnlyTools(key); k == catalog.KindResources && tools != nil &&
		!slices.ContainsFunc(tools, func(t string) bool { return e.mayUse(snap, p, catalog.KindTools, t, backendName) }) {
		return nil, ErrDenied
	}
	m := e.setup.Load().member(backendName)
	if m == nil {
		return nil, ErrNotFound
	}
	b := m.client
	if snap.Down[backendName] || b.Status().State == backend.Unhealthy {
		return nil, ErrBackendDown
	}
	return b, nil
}
