package engine

import (
	"github.com/switchboard-mcp/switchboard/aggregator/internal/authz"
)

// The Cedar policy can be replaced while the engine serves (a
// configuration reload). Views and decisions are cached per snapshot on
// the assumption that the policy under them does not change, so a new
// policy comes with a new snapshot: the same catalog, with empty caches,
// published like any other. Every watcher wakes and compares the view it
// now gets with the one it had, so a principal whose view the policy
// changed is told (list_changed) and one whose view it did not change is
// not.
//
// The policy in force is the one the current catalogs were published
// under, never a newer one waiting for a build: a reload that changes the
// backends or servers and the policy together (Reconfigure with
// Options.Authz) publishes both in one build, so no request sees the new
// catalog under the old policy, or the old catalog under the new one.

// policy is one authorizer. It is replaced whole; published snapshots
// name the policy their views are decided by.
type policy struct {
	authz *authz.Authorizer
}

// authorizer returns the policy in force, the one the current catalogs
// were published under; nil allows everything.
func (e *Engine) authorizer() *authz.Authorizer {
	return e.current.Load().byServer[""].policy.authz
}

// nextPolicy returns the policy the next build publishes under.
func (e *Engine) nextPolicy() *policy { return e.policy.Load() }

// SetAuthorizer puts a new policy in force (nil allows everything): it
// publishes the current catalog again under it. Calls decided before it
// returns may still have used the old policy; every view and decision
// made on the snapshot it publishes uses the new one.
func (e *Engine) SetAuthorizer(az *authz.Authorizer) {
	e.policy.Store(&policy{authz: az})
	e.build()
}

// PolicyID names the policy a snapshot was published under; two are
// equal when the policy is the same one.
type PolicyID struct{ p *policy }

// A watcher of all changes, whose view is the unfiltered one, needs the
// policy a catalog was published under (AllSnapshots): a new policy may
// change every principal's view while the catalog stays the same.
