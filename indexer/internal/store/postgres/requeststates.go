package postgres

import (
	"context"
	"time"
)

// ConsumeRequestState records the state's use; the primary key makes the
// first insert of a digest the only one that lands, across replicas.
func (s *Store) ConsumeRequestState(ctx context.Context, digest string, expiresAt time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO consumed_request_states (state_digest, expires_at) VALUES ($1, $2)
		ON CONFLICT (state_digest) DO NOTHING`, digest, expiresAt)
	if err != nil {
		return false, classify(err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseRequestState drops the record of digest.
func (s *Store) ReleaseRequestState(ctx context.Context, digest string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM consumed_request_states WHERE state_digest = $1`, digest)
	return classify(err)
}
