package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// StateUses makes a sealed request state good for one retry. Any replica
// can open a state, so the record of the states used up must be one every
// replica shares: the indexer's database (IndexerService.ConsumeRequestState),
// asked when a retry arrives, before the backend sees it. Without an
// indexer the record is this replica's own: a state is then used once per
// replica, which is the whole deployment only when there is one replica.
//
// With an indexer, a retry whose state cannot be recorded (the indexer or
// its database unreachable) is refused for now (ErrUnrecorded) and its
// state is left unused, so the client may retry it later: failing closed,
// because accepting it could let a replay reach the backend unseen. The
// record of a state is kept until the state expires.
type StateUses struct {
	client indexerv1.IndexerServiceClient // nil: this replica only
	now    func() time.Time

	mu     sync.Mutex
	local  map[string]time.Time // id digest -> state expiry
	pruned time.Time
}

// maxLocalStateUses bounds the record without an indexer: each entry is a
// state a client retried within its TTL. Past it, retries are refused
// until entries expire, rather than a state being forgotten early.
const maxLocalStateUses = 100_000

// recordWait bounds the wait for the indexer's answer.
const recordWait = 5 * time.Second

// ErrReplayed means the state was used before.
var ErrReplayed = errors.New("request state already used")

// ErrUnrecorded means the use could not be recorded now; the state is not
// used up.
var ErrUnrecorded = errors.New("request state use cannot be recorded now")

// NewStateUses records uses in the indexer behind client, or, with a nil
// client, on this replica.
func NewStateUses(client indexerv1.IndexerServiceClient) *StateUses {
	return &StateUses{client: client, now: time.Now, local: map[string]time.Time{}}
}

// Consume uses up the state with one-time id, valid until expiresAt:
// nil the first time, ErrReplayed after, ErrUnrecorded when that cannot be
// told now.
func (u *StateUses) Consume(ctx context.Context, id string, expiresAt time.Time) error {
	sum := sha256.Sum256([]byte(id))
	digest := hex.EncodeToString(sum[:])
	if u.client == nil {
		return u.consumeLocal(digest, expiresAt)
	}
	ctx, cancel := context.WithTimeout(ctx, recordWait)
	defer cancel()
	resp, err := u.client.ConsumeRequestState(ctx, &indexerv1.ConsumeRequestStateRequest{StateDigest: digest, ExpiresAt: timestamppb.New(expiresAt)})
	switch {
	case err != nil:
		return errors.Join(ErrUnrecorded, err)
	case !resp.GetFirstUse():
		return ErrReplayed
	}
	return nil
}

func (u *StateUses) consumeLocal(digest string, expiresAt time.Time) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	if until, ok := u.local[digest]; ok && now.Before(until) {
		return ErrReplayed
	}
	if len(u.local) >= maxLocalStateUses {
		// A full record is swept at most once a second, so refused
		// retries stay cheap.
		if now.Sub(u.pruned) < time.Second {
			return ErrUnrecorded
		}
		u.pruned = now
		for d, until := range u.local {
			if !now.Before(until) {
				delete(u.local, d)
			}
		}
		if len(u.local) >= maxLocalStateUses {
			return ErrUnrecorded
		}
	}
	u.local[digest] = expiresAt
	return nil
}
