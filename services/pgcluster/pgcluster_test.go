package pgcluster

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func queryOne(ctx context.Context, url string) (int, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT 1").Scan(&n)
	return n, err
}

func postmasterPID(t *testing.T, c *Cluster) int {
	t.Helper()
	raw, err := os.ReadFile(c.dataDir + "/postmaster.pid")
	if err != nil {
		t.Fatalf("read postmaster.pid: %v", err)
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(first)
	if err != nil {
		t.Fatalf("parse postmaster.pid: %v", err)
	}
	return pid
}

func TestLifecycle(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		t.Run("tcp="+strconv.FormatBool(tcp), func(t *testing.T) {
			ctx := t.Context()
			c, err := Start(ctx, Options{TCP: tcp, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(c.URL("x"), "127.0.0.1"); got != tcp {
				t.Fatalf("URL %q: TCP=%v", c.URL("x"), tcp)
			}
			if err := c.CreateDatabase(ctx, "app"); err != nil {
				t.Fatal(err)
			}
			if n, err := queryOne(ctx, c.URL("app")); err != nil || n != 1 {
				t.Fatalf("query new database: %d, %v", n, err)
			}
			if err := c.CreateDatabase(ctx, "app"); err == nil {
				t.Fatal("creating a duplicate database succeeded")
			}

			pid := postmasterPID(t, c)
			if err := c.StopServer(ctx); err != nil {
				t.Fatal(err)
			}
			if processAlive(pid) {
				t.Fatalf("postmaster %d alive after StopServer", pid)
			}
			if _, err := queryOne(ctx, c.URL("app")); err == nil {
				t.Fatal("query succeeded while the server was stopped")
			}
			if err := c.StartServer(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := queryOne(ctx, c.URL("app")); err != nil || n != 1 {
				t.Fatalf("query after restart (data kept): %d, %v", n, err)
			}

			pid = postmasterPID(t, c)
			dir := c.dir
			if err := c.Stop(); err != nil {
				t.Fatal(err)
			}
			if processAlive(pid) {
				t.Fatalf("postmaster %d alive after Stop", pid)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("cluster directory left behind: %v", err)
			}
		})
	}
}

func TestSweepStale(t *testing.T) {
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// A pid that cannot be alive: one past the kernel's maximum.
	if err := os.WriteFile(dir+"/"+ownerFile, []byte("4194305"), 0o644); err != nil {
		t.Fatal(err)
	}
	live, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(live) })
	if err := os.WriteFile(live+"/"+ownerFile, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	sweepStale(t.Logf)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale directory kept: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("live directory removed: %v", err)
	}
}
