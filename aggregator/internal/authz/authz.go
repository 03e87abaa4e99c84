// Package authz decides with Cedar what a principal may use.
//
// Entities: the principal is User::"<subject>", a member of Group::"<g>" for
// each of its groups; actions are Action::"call_tool",
// Action::"read_resource" and Action::"get_prompt"; resources are
// Tool::"<advertised name>", Resource::"<uri>" and Prompt::"<advertised
// name>", each a child of Backend::"<backend name>". Through a virtual
// server (/mcp/<server>) the backend is in turn a child of
// Server::"<server name>", so `resource in Server::"support"` is how a
// policy names what a server serves, and who may use it; through the
// plain /mcp (the whole catalog) a backend has no parent.
package authz

import (
	"crypto/sha256"
	"fmt"
	"os"

	"github.com/cedar-policy/cedar-go"
)

// Actions and resource types of the entity model.
const (
	ActionCallTool     = "call_tool"
	ActionReadResource = "read_resource"
	ActionGetPrompt    = "get_prompt"

	TypeTool     = "Tool"
	TypeResource = "Resource"
	TypePrompt   = "Prompt"
)

// Authorizer evaluates a Cedar policy set. A nil *Authorizer allows
// everything (no policy file configured).
type Authorizer struct {
	policies *cedar.PolicySet
	// sum is the SHA-256 of the source the policies were parsed from.
	sum [sha256.Size]byte
}

// Load reads a Cedar policy file. An empty path means no policy: allow all.
// A file that does not parse is an error, so a typo never opens access.
func Load(path string) (*Authorizer, error) {
	if path == "" {
		return nil, nil
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read policy file: %w", err)
	}
	return Parse(path, src)
}

// Parse parses Cedar policies; name labels errors.
func Parse(name string, src []byte) (*Authorizer, error) {
	ps, err := cedar.NewPolicySetFromBytes(name, src)
	if err != nil {
		return nil, fmt.Errorf("parse policy file %s: %w", name, err)
	}
	return &Authorizer{policies: ps, sum: sha256.Sum256(src)}, nil
}

// Same reports whether a and b were parsed from the same source: a
// reload that reads an unchanged policy file again changes no decision.
// Two nil authorizers (no policy) are the same.
func Same(a, b *Authorizer) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.sum == b.sum
}

// Principal is the identity a decision is made for.
type Principal struct {
	Subject string
	Groups  []string
}

// Allowed reports whether p may perform action on the resource of
// resourceType and id that belongs to backend, used through the virtual
// server named server ("" for the whole catalog).
func (a *Authorizer) Allowed(p Principal, action, resourceType, id, backend, server string) bool {
	if a == nil {
		return true
	}
	user := cedar.NewEntityUID("User", cedar.String(p.Subject))
	groups := make([]cedar.EntityUID, len(p.Groups))
	for i, g := range p.Groups {
		groups[i] = cedar.NewEntityUID("Group", cedar.String(g))
	}
	owner := cedar.NewEntityUID("Backend", cedar.String(backend))
	res := cedar.NewEntityUID(cedar.EntityType(resourceType), cedar.String(id))
	ents := entities{
		user:     cedar.Entity{UID: user, Parents: cedar.NewEntityUIDSet(groups...)},
		resource: cedar.Entity{UID: res, Parents: cedar.NewEntityUIDSet(owner)},
		backend:  cedar.Entity{UID: owner, Parents: cedar.NewEntityUIDSet()},
	}
	if server != "" {
		ents.backend.Parents = cedar.NewEntityUIDSet(cedar.NewEntityUID("Server", cedar.String(server)))
	}
	decision, _ := cedar.Authorize(a.policies, ents, cedar.Request{
		Principal: user,
		Action:    cedar.NewEntityUID("Action", cedar.String(action)),
		Resource:  res,
		Context:   cedar.NewRecord(nil),
	})
	return decision == cedar.Allow
}

// entities answers Cedar's entity lookups for one request without building
// a map: the user, the resource and its backend are the only entities with
// parents.
type entities struct {
	user, resource, backend cedar.Entity
}

func (e entities) Get(uid cedar.EntityUID) (cedar.Entity, bool) {
	switch uid {
	case e.user.UID:
		return e.user, true
	case e.resource.UID:
		return e.resource, true
	case e.backend.UID:
		return e.backend, true
	}
	return cedar.Entity{}, false
}
