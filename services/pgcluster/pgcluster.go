// Package pgcluster runs a throwaway PostgreSQL cluster from the local
// PostgreSQL binaries, for tests and for the local dev runner.
//
// The cluster lives in a fresh temporary directory with a private Unix socket
// directory, so any number of clusters run side by side without port clashes.
// Durability is switched off (fsync, synchronous_commit, full_page_writes)
// because the data is thrown away. initdb refuses to run as root, so when the
// caller is root the binaries run as the "postgres" user. The postmaster gets
// a parent-death signal, so it dies with the process that started it even
// after a kill -9; directories such runs leave behind are swept by the next
// Start.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configures a cluster.
type Options struct {
	// TCP also listens on 127.0.0.1 at a free port; URL then uses TCP
	// instead of the Unix socket (for processes that cannot reach the
	// socket directory).
	TCP bool
	// Logf, when set, receives progress messages.
	Logf func(format string, args ...any)
}

// Cluster is a running (or stopped) throwaway PostgreSQL cluster.
type Cluster struct {
	opts    Options
	binDir  string
	dir     string // everything lives under here; removed by Stop
	dataDir string
	sockDir string
	port    int
	cred    *syscall.Credential // nil when not running as root

	mu     sync.Mutex
	server *exec.Cmd
	exited chan struct{} // closed when the running postmaster exits
}

const (
	dirPrefix     = "switchboard-pg-"
	ownerFile     = "owner.pid"
	readyTimeout  = 60 * time.Second
	stopGrace     = 10 * time.Second
	superuserName = "postgres"
)

// Start creates a cluster with initdb, starts it and waits until it accepts
// connections.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	binDir, err := findBinDir()
	if err != nil {
		return nil, err
	}
	sweepStale(opts.logf)
	c := &Cluster{opts: opts, binDir: binDir, port: 5432}
	if os.Geteuid() == 0 {
		if c.cred, err = postgresCredential(); err != nil {
			return nil, err
		}
	}
	// os.MkdirTemp, not t.TempDir: the latter's parents are 0700 root, which
	// the postgres user could not traverse.
	if c.dir, err = os.MkdirTemp("", dirPrefix); err != nil {
		return nil, fmt.Errorf("pgcluster: create directory: %w", err)
	}
	if err := c.prepare(ctx); err != nil {
		_ = os.RemoveAll(c.dir)
		return nil, err
	}
	if err := c.StartServer(ctx); err != nil {
		_ = os.RemoveAll(c.dir)
		return nil, err
	}
	return c, nil
}

func (o Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

// prepare lays out the directory and runs initdb.
func (c *Cluster) prepare(ctx context.Context) error {
	c.dataDir = filepath.Join(c.dir, "data")
	c.sockDir = filepath.Join(c.dir, "sock")
	if err := os.WriteFile(filepath.Join(c.dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := os.Mkdir(c.sockDir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if c.cred != nil {
		for _, p := range []string{c.dir, c.sockDir} {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return fmt.Errorf("pgcluster: chown %s: %w", p, err)
			}
		}
	}
	if c.opts.TCP {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.port = port
	}
	start := time.Now()
	cmd := c.command(ctx, "initdb", "-D", c.dataDir, "-U", superuserName, "-A", "trust",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgcluster: initdb: %w: %s", err, strings.TrimSpace(out.String()))
	}
	c.opts.logf("pgcluster: initdb in %s (%s)", time.Since(start).Round(time.Millisecond), c.dataDir)
	return nil
}

// command builds an exec.Cmd for a PostgreSQL binary, dropping root.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	// The postgres user must be able to resolve its working directory.
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	return cmd
}

// URL returns a pgx-usable URL for database, with sslmode=disable.
func (c *Cluster) URL(database string) string {
	if c.opts.TCP {
		return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", superuserName, c.port, database)
	}
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable", superuserName, database, c.sockDir, c.port)
}

// CreateDatabase creates an empty database.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("pgcluster: create database %q: %w", name, err)
	}
	return nil
}

// StartServer starts the postmaster (again) on the same data directory and
// port, and waits until it accepts connections.
func (c *Cluster) StartServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.server != nil {
		return errors.New("pgcluster: server already running")
	}
	logPath := filepath.Join(c.dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	listen := ""
	if c.opts.TCP {
		listen = "127.0.0.1"
	}
	// Not CommandContext: the server outlives ctx, which only bounds startup.
	cmd := c.command(context.Background(), "postgres", "-D", c.dataDir, "-k", c.sockDir,
		"-p", strconv.Itoa(c.port), "-c", "listen_addresses="+listen,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The postmaster dies with its parent. Pdeathsig fires when the forking
	// *thread* exits, so the process is started and waited on by one locked
	// goroutine whose thread lives exactly as long as the child.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	// Its own process group: a Ctrl-C at the terminal must reach the owner,
	// which stops PostgreSQL last, not PostgreSQL while its clients run.
	cmd.SysProcAttr.Setpgid = true
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logFile.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("pgcluster: start postgres: %w", err)
	}
	c.server, c.exited = cmd, exited
	if err := c.waitReady(ctx, logPath); err != nil {
		c.stopLocked()
		return err
	}
	c.opts.logf("pgcluster: postgres ready at %s", c.URL(""))
	return nil
}

// waitReady polls until the server accepts connections, it exits, or the
// deadline passes.
func (c *Cluster) waitReady(ctx context.Context, logPath string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("pgcluster: postgres exited during startup: %s", tail(logPath))
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: postgres not ready: %w (last error: %v): %s", ctx.Err(), err, tail(logPath))
		case <-tick.C:
		}
	}
}

// StopServer stops the postmaster (fast shutdown) and keeps the data, so
// StartServer can bring it back: for fault-injection tests.
func (c *Cluster) StopServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.server == nil {
		return nil
	}
	c.stopLocked()
	return ctx.Err()
}

func (c *Cluster) stopLocked() {
	// SIGINT is PostgreSQL's fast shutdown: it disconnects clients and
	// exits without waiting for them.
	_ = c.server.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
	case <-time.After(stopGrace):
		_ = c.server.Process.Kill()
		<-c.exited
	}
	c.server, c.exited = nil, nil
}

// Stop stops the server and removes every file of the cluster.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.server != nil {
		c.stopLocked()
	}
	c.mu.Unlock()
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("pgcluster: remove %s: %w", c.dir, err)
	}
	return nil
}

// findBinDir returns $PG_BIN, or the newest /usr/lib/postgresql/*/bin.
func findBinDir() (string, error) {
	if dir := os.Getenv("PG_BIN"); dir != "" {
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", errors.New("pgcluster: no PostgreSQL binaries: set PG_BIN or install postgresql (initdb not found under /usr/lib/postgresql/*/bin)")
	}
	// Sort by major version number, so 16 beats 9.6.
	sort.Slice(found, func(i, j int) bool { return majorVersion(found[i]) < majorVersion(found[j]) })
	return found[len(found)-1], nil
}

func majorVersion(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root needs a postgres user to run initdb as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: postgres uid: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: postgres gid: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// sweepStale removes cluster directories whose owning process is gone (a
// killed test binary). Their postmasters died with their parents.
func sweepStale(logf func(string, ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		if postmasterAlive(d) {
			continue
		}
		if err := os.RemoveAll(d); err == nil {
			logf("pgcluster: removed stale cluster directory %s", d)
		}
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// postmasterAlive guards against removing a directory whose server still
// runs (its owner pid was reused or the death signal was lost).
func postmasterAlive(dir string) bool {
	raw, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	return err == nil && pid > 0 && processAlive(pid)
}

func tail(path string) string {
	raw, _ := os.ReadFile(path)
	const max = 2000
	if len(raw) > max {
		raw = raw[len(raw)-max:]
	}
	return strings.TrimSpace(string(raw))
}
