package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// A running service takes a new version of the configuration file without
// a restart: Watch notices that the file's content changed (it polls a
// digest of the content, not the file's identity, so that a Kubernetes
// ConfigMap update, which swaps a symlink under the mounted file, is seen
// like an edit in place) or is told to look now (SIGHUP), then parses and
// validates the new file and hands it to the service. A file that does not
// parse, does not validate or is refused by the service changes nothing:
// the configuration in force stays, and one log line says why.
//
// A file rewritten in place is cut short while it is written, and the part
// written first is usually valid YAML that validates: one cut before
// gateway.auth runs the gateway anonymous, one cut before aggregator.authz
// allows everything. So a change is taken only once the same content has
// been read on two checks in a row (a file being written differs between
// them), and a file with nothing in it is never taken. SIGHUP takes the
// file at once: the operator signals once it is written.

// Reload configures the watch of the configuration file.
type Reload struct {
	// Interval is how often the file's content (and that of the files it
	// names that a service reads live, such as the Cedar policy file) is
	// compared with the last one seen (default 2s); a change is taken at
	// the second check that reads it. SIGHUP reloads at once whatever the
	// interval.
	Interval Duration `yaml:"interval"`
}

// DefaultReloadInterval is how often the configuration file is checked.
const DefaultReloadInterval = 2 * time.Second

// WatchOptions describe one service's watch of its configuration file.
type WatchOptions struct {
	// Path is the configuration file.
	Path string
	// Current is the configuration in force, as loaded from Path at start;
	// Loaded is the content it was parsed from (nil: the file as Watch
	// first reads it counts as seen).
	Current *Config
	Loaded  []byte
	// Validate checks a new configuration as the service checks it at
	// start; a file it refuses is rejected.
	Validate func(*Config) error
	// Apply puts a validated configuration in force, wholly or not at all:
	// an error rejects the file and must leave the configuration in force
	// unchanged.
	Apply func(*Config) error
	// Related names the files besides Path that Apply reads for a
	// configuration (the aggregator's Cedar policy file): a change of
	// their content reloads too. Their content as Watch first reads it
	// counts as seen, so a service starts Watch right after reading them.
	Related func(*Config) []string
	// Trigger reloads at once on every value received (SIGHUP), even when
	// nothing changed.
	Trigger <-chan os.Signal
	// Result, if set, is told of every reload attempt: whether the file
	// was taken, and when.
	Result func(ok bool, at time.Time)
	// Outcome, if set, is told of every reload attempt too, with the
	// reason a rejected one was rejected (nil: in force); its text names
	// keys and environment variables, never a value (the audit trail's
	// config_reload events).
	Outcome func(err error, forced bool)
	Log     *slog.Logger
	// Lookup expands ${VAR} references (default os.LookupEnv).
	Lookup func(string) (string, bool)
}

// Watch reloads the configuration file as its content changes, and on
// every Trigger, until ctx ends. See the package's reload comment.
func Watch(ctx context.Context, o WatchOptions) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Lookup == nil {
		o.Lookup = os.LookupEnv
	}
	if o.Current == nil {
		o.Current = &Config{}
	}
	w := &watcher{WatchOptions: o, current: o.Current}
	if o.Loaded != nil {
		w.seen = w.fingerprint(o.Loaded, o.Current)
	} else if raw, err := os.ReadFile(o.Path); err == nil {
		w.seen = w.fingerprint(raw, o.Current)
	}
	w.last = w.seen
	tick := time.NewTimer(w.interval())
	defer tick.Stop()
	for {
		forced := false
		select {
		case <-ctx.Done():
			return
		case <-o.Trigger:
			forced = true
		case <-tick.C:
		}
		w.check(forced)
		tick.Reset(w.interval())
	}
}

// watcher is the state of one Watch.
type watcher struct {
	WatchOptions
	current *Config
	// seen is the fingerprint of the last content looked at, taken or
	// rejected: a rejected file is not tried (nor logged) again until its
	// content changes or a Trigger asks.
	seen [sha256.Size]byte
	// last is the fingerprint read by the previous check: new content is
	// looked at only once a check reads it again.
	last [sha256.Size]byte
}

func (w *watcher) interval() time.Duration {
	return w.current.Reload.Interval.Or(DefaultReloadInterval)
}

// fingerprint digests the file's content and that of every related file
// cfg names (nil cfg: none), each labelled with its path.
func (w *watcher) fingerprint(raw []byte, cfg *Config) [sha256.Size]byte {
	h := sha256.New()
	h.Write(raw)
	if cfg != nil && w.Related != nil {
		for _, path := range w.Related(cfg) {
			h.Write([]byte{0})
			h.Write([]byte(path))
			h.Write([]byte{0})
			content, err := os.ReadFile(path)
			if err != nil {
				h.Write([]byte("unreadable: " + err.Error()))
				continue
			}
			// The content's own digest keeps the framing unambiguous.
			d := sha256.Sum256(content)
			h.Write(d[:])
		}
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// check reads the file and reloads it if its content (or a related
// file's) changed since last seen and the previous check read the same,
// or when forced.
func (w *watcher) check(forced bool) {
	raw, err := os.ReadFile(w.Path)
	var cfg *Config
	var sum [sha256.Size]byte
	if err != nil {
		sum = sha256.Sum256([]byte("unreadable: " + err.Error()))
	} else {
		cfg, err = Parse(raw, w.Lookup)
		sum = w.fingerprint(raw, cfg)
	}
	settled := sum == w.last
	w.last = sum
	if !forced && (sum == w.seen || !settled) {
		return
	}
	w.seen = sum
	if err == nil && noDocument(raw) {
		err = errors.New("the file holds no configuration (nothing, blanks, comments, or an empty document): a reload never takes it, as it would drop every setting")
	}
	if err != nil {
		w.reject(err, forced)
		return
	}
	// The service's own checks may return KeyErrors too: cfg names the
	// variables their values came from.
	if w.Validate != nil {
		if err := w.Validate(cfg); err != nil {
			w.reject(cfg.Annotate(err), forced)
			return
		}
	}
	if err := w.Apply(cfg); err != nil {
		w.reject(cfg.Annotate(err), forced)
		return
	}
	w.current = cfg
	w.Log.Info("configuration reloaded", "path", w.Path, "forced", forced)
	w.report(nil, forced)
}

// reject logs why the file was not taken. Errors name keys, lines and
// environment variables, never a value (keyerr.go).
func (w *watcher) reject(err error, forced bool) {
	w.Log.Error("configuration reload rejected; the configuration in force is kept", "path", w.Path, "err", oneLine(err.Error()))
	w.report(err, forced)
}

func (w *watcher) report(err error, forced bool) {
	if w.Result != nil {
		w.Result(err == nil, time.Now())
	}
	if w.Outcome != nil {
		w.Outcome(err, forced)
	}
}

// noDocument reports whether raw holds no configuration: nothing, blanks,
// comments, or an empty document ("---", "{}"). Parse takes such a file
// as a configuration of defaults alone, which a start may mean but a
// reload never does.
func noDocument(raw []byte) bool {
	var doc yaml.Node
	if yaml.Unmarshal(raw, &doc) != nil {
		return false
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return true
	}
	// "---" alone is a document whose root is null; "{}" one with an
	// empty mapping: neither holds a setting.
	root := doc.Content[0]
	return root.Tag == "!!null" || root.Kind == yaml.MappingNode && len(root.Content) == 0
}

// oneLine joins a multi-line error (errors.Join) into one log value.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }
