package lifecycle

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// ServeHTTP serves srv on lis until ctx is done, then shuts down gracefully:
// open requests get up to grace to finish, and whatever is still open after
// that (long-lived SSE streams never end by themselves) is cut. It returns
// the server's error if serving failed, nil after a shutdown.
func ServeHTTP(ctx context.Context, srv *http.Server, lis net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
