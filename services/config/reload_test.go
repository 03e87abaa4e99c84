package config

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a log sink the watch writes to while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// watchRun is one Watch under test: what it applied and reported.
type watchRun struct {
	applied chan *Config
	results chan bool
	log     *lockedBuffer
	cancel  context.CancelFunc
	done    chan struct{}
}

// startWatch watches path, whose current content is loaded first, with
// extra settings from adjust.
func startWatch(t *testing.T, path string, adjust func(*WatchOptions)) *watchRun {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(raw, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	r := &watchRun{applied: make(chan *Config, 16), results: make(chan bool, 16), log: &lockedBuffer{}, done: make(chan struct{})}
	o := WatchOptions{
		Path: path, Current: cfg, Loaded: raw,
		Validate: func(c *Config) error { return c.ValidateGateway() },
		Apply:    func(c *Config) error { r.applied <- c; return nil },
		Result:   func(ok bool, _ time.Time) { r.results <- ok },
		Log:      slog.New(slog.NewTextHandler(r.log, nil)),
	}
	if adjust != nil {
		adjust(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { Watch(ctx, o); close(r.done) }()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

const waitFor = 10 * time.Second

func (r *watchRun) nextApplied(t *testing.T) *Config {
	t.Helper()
	select {
	case c := <-r.applied:
		return c
	case <-time.After(waitFor):
		t.Fatalf("no configuration applied within %v; log:\n%s", waitFor, r.log)
		return nil
	}
}

func (r *watchRun) nextResult(t *testing.T) bool {
	t.Helper()
	select {
	case ok := <-r.results:
		return ok
	case <-time.After(waitFor):
		t.Fatalf("no reload attempt within %v; log:\n%s", waitFor, r.log)
		return false
	}
}

// gatewayFile is a configuration the gateway's validation accepts, with
// one API key, checked every 100ms.
func gatewayFile(key string) string {
	return `reload: {interval: 100ms}
gateway:
  aggregator: {address: "127.0.0.1:1", token: t}
  auth:
    mode: apiKeys
    apiKeys: [{key: "` + key + `", subject: alice}]
`
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	// Written whole under another name and renamed, as an editor or a
	// deployment tool does, so the watch never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestWatchSeesAContentChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	writeFile(t, path, gatewayFile("k1"))
	r := startWatch(t, path, nil)
	writeFile(t, path, gatewayFile("k2"))
	if got := r.nextApplied(t).Gateway.Auth.APIKeys[0].Key; got != "k2" {
		t.Fatalf("applied key %q, want k2", got)
	}
	if !r.nextResult(t) {
		t.Fatal("the reload was reported rejected")
	}
	if !strings.Contains(r.log.String(), "configuration reloaded") {
		t.Fatalf("no success line in the log:\n%s", r.log)
	}
}

func TestWatchKeepsTheOldConfigurationOnABadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	writeFile(t, path, gatewayFile("k1"))
	var mu sync.Mutex
	inForce := "k1"
	r := startWatch(t, path, func(o *WatchOptions) {
		apply := o.Apply
		o.Apply = func(c *Config) error {
			if c.Gateway.Auth.APIKeys[0].Key == "refused" {
				return errors.New("the service refuses this one")
			}
			mu.Lock()
			inForce = c.Gateway.Auth.APIKeys[0].Key
			mu.Unlock()
			return apply(c)
		}
	})
	for _, bad := range []struct{ name, content, logged string }{
		{"yaml that does not parse", "gateway: [unclosed\n", "parse config"},
		{"an unknown key", gatewayFile("k1") + "gatway: {}\n", "field gatway not found"},
		{"a file the validation refuses", strings.Replace(gatewayFile("k1"), `address: "127.0.0.1:1"`, `address: ""`, 1), "gateway.aggregator.address is required"},
		{"a file the service refuses", gatewayFile("refused"), "the service refuses this one"},
	} {
		writeFile(t, path, bad.content)
		if r.nextResult(t) {
			t.Fatalf("%s: reported ok", bad.name)
		}
		if !strings.Contains(r.log.String(), bad.logged) || !strings.Contains(r.log.String(), "configuration reload rejected") {
			t.Fatalf("%s: the rejection is not logged with %q:\n%s", bad.name, bad.logged, r.log)
		}
		mu.Lock()
		got := inForce
		mu.Unlock()
		if got != "k1" {
			t.Fatalf("%s: %q in force, want the old k1", bad.name, got)
		}
	}
	// A rejected file is not tried again until it changes: the next attempt
	// is the good file.
	writeFile(t, path, gatewayFile("k3"))
	if got := r.nextApplied(t).Gateway.Auth.APIKeys[0].Key; got != "k3" {
		t.Fatalf("applied %q, want k3", got)
	}
	if !r.nextResult(t) {
		t.Fatal("the good file was reported rejected")
	}
	if n := strings.Count(r.log.String(), "configuration reload rejected"); n != 4 {
		t.Fatalf("%d rejections logged, want one per bad file (4):\n%s", n, r.log)
	}
}

func TestWatchRejectionNamesNoSecret(t *testing.T) {
	t.Setenv("SWITCHBOARD_TEST_SECRET", "s3cr3t-value-that-must-not-be-logged")
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	writeFile(t, path, gatewayFile("k1"))
	r := startWatch(t, path, nil)
	// The secret lands where a number belongs: yaml's error would quote it.
	writeFile(t, path, gatewayFile("k1")+"  http: {maxBodyBytes: \"${SWITCHBOARD_TEST_SECRET}\"}\n")
	if r.nextResult(t) {
		t.Fatal("reported ok")
	}
	// And a reference to an unset variable names the variable.
	writeFile(t, path, gatewayFile("${SWITCHBOARD_TEST_UNSET}"))
	if r.nextResult(t) {
		t.Fatal("reported ok")
	}
	log := r.log.String()
	if strings.Contains(log, "s3cr3t") {
		t.Fatalf("the log shows the secret:\n%s", log)
	}
	if !strings.Contains(log, "maxBodyBytes") && !strings.Contains(log, "int64") {
		t.Fatalf("the log does not say what is wrong:\n%s", log)
	}
	if !strings.Contains(log, "SWITCHBOARD_TEST_UNSET") {
		t.Fatalf("the log does not name the unset variable:\n%s", log)
	}
}

func TestWatchReloadsOnSIGHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	writeFile(t, path, strings.Replace(gatewayFile("k1"), "interval: 100ms", "interval: 1h", 1))
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	t.Cleanup(func() { signal.Stop(hup) })
	r := startWatch(t, path, func(o *WatchOptions) { o.Trigger = hup })
	// The file does not change and the interval is an hour: only the
	// signal reloads it.
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if got := r.nextApplied(t).Gateway.Auth.APIKeys[0].Key; got != "k1" {
		t.Fatalf("applied %q, want k1", got)
	}
	// The reload is logged after it is applied and before its result is
	// reported: wait for the result before reading the log.
	if !r.nextResult(t) {
		t.Fatalf("the forced reload failed:\n%s", r.log)
	}
	if !strings.Contains(r.log.String(), "forced=true") {
		t.Fatalf("the reload is not logged as forced:\n%s", r.log)
	}
	// A change of the file is seen at the next signal.
	writeFile(t, path, strings.Replace(gatewayFile("k2"), "interval: 100ms", "interval: 1h", 1))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if got := r.nextApplied(t).Gateway.Auth.APIKeys[0].Key; got != "k2" {
		t.Fatalf("applied %q, want k2", got)
	}
	if !r.nextResult(t) {
		t.Fatalf("the second forced reload failed:\n%s", r.log)
	}
}

// TestWatchWaitsForAFileWrittenInPlace: a file rewritten in place is
// read half-written now and then, and what was written first usually
// validates: here a gateway file cut before gateway.auth, which would run
// the gateway anonymous. The watch takes the file only once it reads the
// same content twice, and never an empty one, which would drop every
// setting (the aggregator's validation takes it: Validate is off here).
func TestWatchWaitsForAFileWrittenInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	writeFile(t, path, gatewayFile("k1"))
	full := gatewayFile("k2")
	head := full[:strings.Index(full, "  auth:")]
	// The watch holds on its first read of the head until the rest is
	// written: as a write in place under way when the file was read.
	headRead, rest := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r := startWatch(t, path, func(o *WatchOptions) {
		o.Validate = nil
		o.Related = func(c *Config) []string {
			if c.Gateway.Auth.Mode == "" {
				once.Do(func() { close(headRead); <-rest })
			}
			return nil
		}
	})
	if err := os.WriteFile(path, []byte(head), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-headRead:
	case <-time.After(waitFor):
		t.Fatalf("the head of the file was not read within %v; log:\n%s", waitFor, r.log)
	}
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	close(rest)
	if c := r.nextApplied(t); c.Gateway.Auth.Mode != "apiKeys" {
		t.Fatalf("a file cut before gateway.auth was put in force (mode %q)", c.Gateway.Auth.Mode)
	}
	if !r.nextResult(t) {
		t.Fatalf("the whole file was reported rejected:\n%s", r.log)
	}

	// Nothing, comments, or a document marker with nothing in it (as a
	// file emptied in place begins).
	for _, empty := range []string{"# emptied\n\n", "---\n# emptied\n", "# c\n---\n", "{}\n"} {
		if err := os.WriteFile(path, []byte(empty), 0o600); err != nil {
			t.Fatal(err)
		}
		if r.nextResult(t) {
			t.Fatalf("a file with no configuration in it (%q) was put in force", empty)
		}
	}
	if !strings.Contains(r.log.String(), "holds no configuration") {
		t.Fatalf("the rejection does not say the file is empty:\n%s", r.log)
	}
}

// TestWatchSeesAKubernetesSymlinkSwap updates the file as the kubelet
// updates a mounted ConfigMap: the file is a symlink through ..data, a
// symlink to a timestamped directory, and an update writes a new directory
// and swaps ..data to it in one rename. The file's own path never changes.
func TestWatchSeesAKubernetesSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name, content string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "switchboard.yaml"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_12_01_10_00_00.1", gatewayFile("k1"))
	if err := os.Symlink("..2026_12_01_10_00_00.1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "switchboard.yaml")
	if err := os.Symlink(filepath.Join("..data", "switchboard.yaml"), path); err != nil {
		t.Fatal(err)
	}
	r := startWatch(t, path, nil)

	version("..2026_12_01_10_05_00.2", gatewayFile("k2"))
	if err := os.Symlink("..2026_12_01_10_05_00.2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..2026_12_01_10_00_00.1")); err != nil {
		t.Fatal(err)
	}
	if got := r.nextApplied(t).Gateway.Auth.APIKeys[0].Key; got != "k2" {
		t.Fatalf("applied %q, want k2", got)
	}
}

func TestWatchSeesARelatedFileChange(t *testing.T) {
	dir := t.TempDir()
	path, policy := filepath.Join(dir, "switchboard.yaml"), filepath.Join(dir, "policy.cedar")
	writeFile(t, policy, "permit (principal, action, resource);\n")
	writeFile(t, path, gatewayFile("k1"))
	r := startWatch(t, path, func(o *WatchOptions) { o.Related = func(*Config) []string { return []string{policy} } })
	// A first reload shows the watch has read the related file as it was.
	writeFile(t, path, gatewayFile("k2"))
	if got := r.nextApplied(t).Gateway.Auth.APIKeys[0].Key; got != "k2" {
		t.Fatalf("applied %q, want k2", got)
	}
	writeFile(t, policy, "forbid (principal, action, resource);\n")
	if got := r.nextApplied(t).Gateway.Auth.APIKeys[0].Key; got != "k2" {
		t.Fatalf("applied %q, want the same file again (k2)", got)
	}
}

func TestChangedNamesKeys(t *testing.T) {
	a, err := Parse([]byte(gatewayFile("k1")), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(gatewayFile("k2")+"  listen: 127.0.0.1:9\n  http: {maxBodyBytes: 10}\naggregator: {backends: [{name: x, url: http://x}]}\n"), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	got := Changed(a, b)
	want := []string{"aggregator.backends", "gateway.auth.apiKeys", "gateway.http.maxBodyBytes", "gateway.listen"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Changed = %v, want %v", got, want)
	}
	if len(Changed(a, a)) != 0 {
		t.Fatalf("Changed(a, a) = %v", Changed(a, a))
	}
	restart := NeedRestart(got, []string{"gateway", "servers"}, []string{"gateway.auth"})
	if strings.Join(restart, " ") != "gateway.http.maxBodyBytes gateway.listen" {
		t.Fatalf("NeedRestart = %v", restart)
	}
}
