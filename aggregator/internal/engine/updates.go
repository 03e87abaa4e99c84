package engine

import (
	"context"
	"sync"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
)

// resourceKey names a subscribed resource at its owning backend.
type resourceKey struct{ backend, uri string }

// updateHub routes a backend's notifications/resources/updated to the
// watchers that subscribed to that URI, and only to them.
type updateHub struct {
	mu sync.Mutex
	// watchers holds, per URI at a backend, each watcher's channel with
	// a URI it knows that resource by (catalog.UIURI, or a spelling of
	// the URI): a watcher that names the resource under two spellings is
	// told of an update under each.
	watchers map[resourceKey]map[watcher]bool
}

// watcher is a watcher's channel and one URI it knows a resource by.
type watcher struct {
	ch         chan<- string
	advertised string
}

// UpdateBuffer is how many updates a watcher may fall behind; past it
// further updates for that watcher are dropped (an update says only "read
// it again", so a burst loses nothing a later one does not repeat).
const UpdateBuffer = 64

// Subscribe subscribes at the backend (reference counted there) to the
// resource it calls uri and routes its updates to ch, as advertised (the
// URI the watcher knows it by), until the returned function is called.
func (e *Engine) Subscribe(ctx context.Context, b *backend.Client, uri, advertised string, ch chan<- string) (func(), error) {
	if err := b.Subscribe(ctx, uri); err != nil {
		return nil, err
	}
	k := resourceKey{b.Name(), uri}
	e.updates.mu.Lock()
	w := watcher{ch, advertised}
	if e.updates.watchers[k] == nil {
		e.updates.watchers[k] = map[watcher]bool{}
	}
	e.updates.watchers[k][w] = true
	e.updates.mu.Unlock()
	return func() {
		e.updates.mu.Lock()
		delete(e.updates.watchers[k], w)
		if len(e.updates.watchers[k]) == 0 {
			delete(e.updates.watchers, k)
		}
		e.updates.mu.Unlock()
		e.subscriber(b).Unsubscribe(ctx, uri)
	}, nil
}

// subscriber is the client that holds b's subscriptions now: the client
// that replaced b for its backend in a reload, which adopted them
// (Reconfigure), else b.
func (e *Engine) subscriber(b *backend.Client) *backend.Client {
	if m := e.setup.Load().member(b.Name()); m != nil {
		return m.client
	}
	return b
}

// resourceUpdated is called by backend name's client for each update.
func (e *Engine) resourceUpdated(name, uri string) {
	e.updates.mu.Lock()
	defer e.updates.mu.Unlock()
	for w := range e.updates.watchers[resourceKey{name, uri}] {
		select {
		case w.ch <- w.advertised:
		default:
			e.log.Debug("resource update dropped for a slow watcher", "backend", name)
		}
	}
}
