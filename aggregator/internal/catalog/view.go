package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// Decider says whether a principal may use the item of kind k with key,
// owned by backend. Views are built from its answers, so lists, Discover
// and calls share one decision.
type Decider func(k Kind, key, backend string) bool

// View is one principal's part of a snapshot: per kind, the positions of
// the visible items in the snapshot's sorted lists (so still sorted).
type View struct {
	Snapshot *Snapshot
	items    [numKinds][]int32
	digests  [numKinds]string
	// noUI holds the snapshot positions of the visible tools whose UI the
	// principal may not read (ui.go); nil for none.
	noUI map[int32]bool
}

// Tool is the message of the tool at snapshot position i as this view
// shows it: without its UI when the principal may not read it.
func (v *View) Tool(i int32) *aggregatorv1.Tool {
	t := &v.Snapshot.Tools[i]
	if v.noUI[i] {
		return t.noUI
	}
	return t.Msg
}

// Items returns the snapshot positions of the visible items of kind k.
func (v *View) Items(k Kind) []int32 { return v.items[k] }

// Len is the number of visible items of kind k.
func (v *View) Len(k Kind) int { return len(v.items[k]) }

// Digest identifies the content of the view's kind k: two views with equal
// digests for a kind hold exactly the same items of that kind.
func (v *View) Digest(k Kind) string { return v.digests[k] }

// Key is the sort key of the view's i-th item of kind k.
func (v *View) Key(k Kind, i int) string {
	key, _ := v.Snapshot.itemMeta(k, int(v.items[k][i]))
	return key
}

// viewCache holds the views of one snapshot by the SHA-256 of the
// principal key. Principals are many and snapshots few, so views are
// computed once per snapshot.
type viewCache struct {
	mu sync.Mutex
	m  map[[viewKeyBytes]byte]*View
}

// maxCachedViews bounds memory when very many distinct principals call
// between two snapshots; the cache starts over when it is full. A view
// costs the same whoever it is for: its key is a digest of the principal
// (viewKeyBytes), not the principal, which callers choose (up to 65 KiB,
// svcauth's bounds).
const (
	maxCachedViews = 10000
	viewKeyBytes   = sha256.Size
)

// View returns the view for the principal identified by principalKey,
// computing it with allow on first use. A nil allow shows everything.
func (s *Snapshot) View(principalKey string, allow Decider) *View {
	key := sha256.Sum256([]byte(principalKey))
	s.views.mu.Lock()
	if v, ok := s.views.m[key]; ok {
		s.views.mu.Unlock()
		return v
	}
	s.views.mu.Unlock()

	v := s.newView(allow)

	s.views.mu.Lock()
	defer s.views.mu.Unlock()
	if s.views.m == nil || len(s.views.m) >= maxCachedViews {
		s.views.m = map[[viewKeyBytes]byte]*View{}
	}
	if prev, ok := s.views.m[key]; ok {
		return prev
	}
	s.views.m[key] = v
	return v
}

func (s *Snapshot) newView(allow Decider) *View {
	v := &View{Snapshot: s}
	for _, k := range Kinds {
		h := sha256.New()
		// A server's view differs from the same items in another server
		// (calls route through the server, its overrides apply), so the
		// server is part of every view digest. (The whole catalog's digests
		// are those of its items only.)
		if s.Server != "" {
			h.Write([]byte(s.Server))
			h.Write([]byte{0})
		}
		idx := make([]int32, 0, s.Len(k))
		s.eachDigest(k, func(i int, d []byte) {
			key, b := s.itemMeta(k, i)
			if s.Down[b] || (allow != nil && !allow(k, key, b)) {
				return
			}
			idx = append(idx, int32(i))
			h.Write(d)
			if k == KindTools && allow != nil {
				if ui := s.Tools[i].UI; ui != "" && !allow(KindResources, ui, b) {
					if v.noUI == nil {
						v.noUI = map[int32]bool{}
					}
					v.noUI[int32(i)] = true
					h.Write([]byte("no ui"))
				}
			}
		})
		v.items[k] = idx
		v.digests[k] = hex.EncodeToString(h.Sum(nil))
	}
	return v
}

// decisionCache holds single authorization decisions of one snapshot, for
// calls by principals whose whole view was never computed.
type decisionCache struct {
	mu sync.RWMutex
	m  map[string]bool
	// bytes is the length of the keys in m.
	bytes int
}

// Bounds of the decision cache: it starts over when full. Keys carry
// client input (a resource URI matched by a template), so the cache is
// bounded in bytes as well as entries, and a key too long to be worth
// keeping is decided every time instead.
const (
	maxCachedDecisions     = 100000
	maxCachedDecisionBytes = 16 << 20
	maxCachedKeyBytes      = 1 << 10
)

// Decide returns the cached decision named key, computing it with decide
// on first use. A snapshot and the policy are immutable, so a decision
// holds for the snapshot's life.
func (s *Snapshot) Decide(key string, decide func() bool) bool {
	if len(key) > maxCachedKeyBytes {
		return decide()
	}
	s.decisions.mu.RLock()
	d, ok := s.decisions.m[key]
	s.decisions.mu.RUnlock()
	if ok {
		return d
	}
	d = decide()
	s.decisions.mu.Lock()
	c := &s.decisions
	if c.m == nil || len(c.m) >= maxCachedDecisions || c.bytes+len(key) > maxCachedDecisionBytes {
		c.m, c.bytes = map[string]bool{}, 0
	}
	if _, dup := c.m[key]; !dup {
		c.bytes += len(key)
	}
	c.m[key] = d
	c.mu.Unlock()
	return d
}
