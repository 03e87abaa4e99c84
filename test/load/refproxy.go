package load

import (
	"context"
	"errors"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

// ProxyCommand is the first argument that makes the harness's own
// executable (switchboard-load, or this package's test binary) run the
// reference proxy instead: "<self> proxy --listen ADDR --target URL". The
// proxy is a process of its own so that its CPU time is read from /proc
// apart from the load client's, like every other process's.
const ProxyCommand = "proxy"

// proxyTransport mirrors the load client's: enough idle connections per
// host for the highest concurrency, so the proxy reuses keep-alive
// connections to the backend the way the client reuses its own, and
// compression is left to the two ends.
func proxyTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// NewReferenceProxy is the floor of one HTTP hop: the standard library's
// httputil.ReverseProxy in front of target, parsing nothing of MCP. It
// forwards every path, so /mcp and /healthz reach the backend's. Streamed
// (text/event-stream) responses are flushed as they come.
func NewReferenceProxy(target *url.URL) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: proxyTransport(),
		ErrorLog:  log.New(os.Stderr, "proxy: ", 0),
	}
}

// RunProxy is the reference proxy process's main: it serves until SIGTERM
// or SIGINT, then shuts down gracefully.
func RunProxy(args []string) error {
	fs := flag.NewFlagSet(ProxyCommand, flag.ContinueOnError)
	listen := fs.String("listen", "", "host:port to serve on")
	target := fs.String("target", "", "base URL of the backend (scheme://host:port)")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" || *target == "" || fs.NArg() > 0 {
		return errors.New("usage: proxy --listen host:port --target http://host:port")
	}
	u, err := url.Parse(*target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("--target must be an absolute http(s) URL")
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: NewReferenceProxy(u), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	return lifecycle.ServeHTTP(ctx, srv, lis, 5*time.Second)
}
