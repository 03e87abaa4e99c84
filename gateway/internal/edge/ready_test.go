package edge

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// scriptedHealth answers each Check with the next of its answers, and the
// last one again once they run out.
type scriptedHealth struct {
	healthpb.HealthClient
	answers []error // nil: SERVING; errNotServing: NOT_SERVING
	checks  int
}

var errNotServing = errors.New("not serving")

func (h *scriptedHealth) Check(context.Context, *healthpb.HealthCheckRequest, ...grpc.CallOption) (*healthpb.HealthCheckResponse, error) {
	err := h.answers[min(h.checks, len(h.answers)-1)]
	h.checks++
	switch {
	case err == nil:
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	case err == errNotServing:
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return nil, err
}

// TestReadyOverAggregatorReplicas: a check that fails UNAVAILABLE (a
// replica going away under the balanced connection) is asked once more;
// a second UNAVAILABLE, another error or NOT_SERVING is not ready.
func TestReadyOverAggregatorReplicas(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "connection reset by peer")
	for _, tc := range []struct {
		name       string
		answers    []error
		wantStatus int
		wantChecks int
	}{
		{"serving", []error{nil}, http.StatusOK, 1},
		{"a replica gone, the next serving", []error{unavailable, nil}, http.StatusOK, 2},
		{"every replica gone", []error{unavailable, unavailable}, http.StatusServiceUnavailable, 2},
		{"not serving", []error{errNotServing, nil}, http.StatusServiceUnavailable, 1},
		{"refused", []error{status.Error(codes.PermissionDenied, "no"), nil}, http.StatusServiceUnavailable, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &scriptedHealth{answers: tc.answers}
			g := &Gateway{aggHealth: h}
			w := httptest.NewRecorder()
			g.serveReady(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if w.Code != tc.wantStatus || h.checks != tc.wantChecks {
				t.Fatalf("status %d after %d checks, want %d after %d", w.Code, h.checks, tc.wantStatus, tc.wantChecks)
			}
		})
	}
}
