package devstack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// pollInterval is how often readiness is probed.
const pollInterval = 50 * time.Millisecond

// Probe reports nil when a process is ready, or why it is not.
type Probe func(ctx context.Context) error

// WaitReady polls probe until it succeeds, the process exits, or ctx ends.
// p may be nil for something that is not a child process.
func WaitReady(ctx context.Context, p *Process, probe Probe) error {
	var exited <-chan struct{}
	name := "service"
	if p != nil {
		exited, name = p.Done(), p.Spec.Name
	}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := probe(attempt)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it was ready: %v", name, p.Err())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last: %v)", name, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// HTTPOK probes url with GET and wants a 200.
func HTTPOK(url string) Probe {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// GRPCServing probes the standard gRPC health service at address and wants
// the server as a whole SERVING.
func GRPCServing(address string, tls config.TLS) Probe {
	return func(ctx context.Context) error {
		st, err := GRPCHealth(ctx, address, tls)
		if err != nil {
			return err
		}
		if st != grpc_health_v1.HealthCheckResponse_SERVING {
			return fmt.Errorf("health of %s is %s", address, st)
		}
		return nil
	}
}

// GRPCHealth asks the standard gRPC health service at address for the
// status of the server as a whole. Health needs no service credential.
func GRPCHealth(ctx context.Context, address string, tls config.TLS) (grpc_health_v1.HealthCheckResponse_ServingStatus, error) {
	conn, err := rpc.Dial(config.Endpoint{Address: address}, tls)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	resp, err := grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		return 0, err
	}
	return resp.GetStatus(), nil
}

// DialAddress turns a listen address into one to connect to: an empty or
// wildcard host becomes the loopback address.
func DialAddress(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
