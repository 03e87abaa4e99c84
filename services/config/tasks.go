package config

import (
	"errors"
	"time"
)

// Tasks configures the tasks Switchboard runs: a tools/call of a tool whose
// override sets taskSupport, from a client that can take a task, is
// answered at once with a task the aggregator runs to its end and keeps in
// the indexer's PostgreSQL, where every replica finds it
// (docs/operations.md, "Tasks"). Read by the aggregator at start.
type Tasks struct {
	// DefaultTTL is how long a task and its result are kept after it is
	// created, when the client asks for no TTL (a Modern client never
	// does); MaxTTL caps what a client asks for.
	DefaultTTL Duration `yaml:"defaultTTL"`
	MaxTTL     Duration `yaml:"maxTTL"`
	// PollInterval is the interval clients are told to poll at.
	PollInterval Duration `yaml:"pollInterval"`
	// MaxResultBytes bounds the result (or error) a task keeps: a bigger
	// one fails the task, saying so.
	MaxResultBytes int `yaml:"maxResultBytes"`
	// MaxPerPrincipal bounds the unexpired tasks of one principal, and
	// MaxTasks those of the whole cluster: past them a call that would
	// become a task is refused until some expire.
	MaxPerPrincipal int `yaml:"maxPerPrincipal"`
	MaxTasks        int `yaml:"maxTasks"`
}

// Tasks defaults and bounds.
const (
	DefaultTaskTTL          = time.Hour
	DefaultTaskMaxTTL       = 24 * time.Hour
	DefaultTaskPollInterval = time.Second
	DefaultTaskResultBytes  = 1 << 20
	// MaxTaskResultBytes is what the indexer stores of one result.
	MaxTaskResultBytes = 4 << 20
	// MaxTaskCallBytes is what the indexer stores of a task's call (its
	// arguments and the client's capabilities), and MaxTaskInputBytes of
	// its questions and of the client's answers: the aggregator refuses
	// more before a call starts.
	MaxTaskCallBytes  = 256 << 10
	MaxTaskInputBytes = 256 << 10
	// MaxTaskRequestStateBytes is what the indexer stores of a round's
	// requestState.
	MaxTaskRequestStateBytes  = 1 << 20
	DefaultTasksPerPrincipal  = 100
	DefaultTasks              = 100_000
	MaxTaskTTL                = 7 * 24 * time.Hour
	MinTaskPollInterval       = 100 * time.Millisecond
	MaxTaskPollInterval       = time.Minute
	MaxTasksPerPrincipalLimit = 100_000
)

// WithDefaults is the section with every unset value at its default. An
// unset TTL follows the other one when it is set: defaultTTL is brought
// down to a maxTTL below it (as pageSize is to maxPageSize), and maxTTL
// raised to a defaultTTL above it, up to MaxTaskTTL, so that Validate
// blames only a key the file sets.
func (t Tasks) WithDefaults() Tasks {
	if t.DefaultTTL <= 0 && t.MaxTTL > 0 {
		t.DefaultTTL = Duration(min(DefaultTaskTTL, time.Duration(t.MaxTTL)))
	}
	t.DefaultTTL = Duration(t.DefaultTTL.Or(DefaultTaskTTL))
	t.MaxTTL = Duration(t.MaxTTL.Or(min(max(DefaultTaskMaxTTL, time.Duration(t.DefaultTTL)), MaxTaskTTL)))
	t.PollInterval = Duration(t.PollInterval.Or(DefaultTaskPollInterval))
	t.MaxResultBytes = orInt(t.MaxResultBytes, DefaultTaskResultBytes)
	t.MaxPerPrincipal = orInt(t.MaxPerPrincipal, DefaultTasksPerPrincipal)
	t.MaxTasks = orInt(t.MaxTasks, DefaultTasks)
	return t
}

// Validate checks the section as WithDefaults returns it.
func (t Tasks) Validate() error {
	var errs []error
	if t.DefaultTTL <= 0 || time.Duration(t.DefaultTTL) > time.Duration(t.MaxTTL) {
		errs = append(errs, keyErr("aggregator.tasks.defaultTTL", "must be positive and at most maxTTL (%s)", time.Duration(t.MaxTTL)))
	}
	if time.Duration(t.MaxTTL) > MaxTaskTTL {
		errs = append(errs, keyErr("aggregator.tasks.maxTTL", "is over %s", MaxTaskTTL))
	}
	if p := time.Duration(t.PollInterval); p < MinTaskPollInterval || p > MaxTaskPollInterval {
		errs = append(errs, keyErr("aggregator.tasks.pollInterval", "must be between %s and %s", MinTaskPollInterval, MaxTaskPollInterval))
	}
	if t.MaxResultBytes <= 0 || t.MaxResultBytes > MaxTaskResultBytes {
		errs = append(errs, keyErr("aggregator.tasks.maxResultBytes", "must be between 1 and %d", MaxTaskResultBytes))
	}
	if t.MaxPerPrincipal <= 0 || t.MaxPerPrincipal > MaxTasksPerPrincipalLimit {
		errs = append(errs, keyErr("aggregator.tasks.maxPerPrincipal", "must be between 1 and %d", MaxTasksPerPrincipalLimit))
	}
	if t.MaxTasks < t.MaxPerPrincipal {
		errs = append(errs, keyErr("aggregator.tasks.maxTasks", "must be at least maxPerPrincipal"))
	}
	return errors.Join(errs...)
}

// validateTasks checks aggregator.tasks and, when an override lets a tool
// run as a task, the indexer that keeps tasks.
func (c *Config) validateTasks() error {
	err := c.Aggregator.Tasks.WithDefaults().Validate()
	if !c.RunsTasks() {
		return err
	}
	if ep := c.Aggregator.IndexerEndpoint(); ep.Address == "" || ep.Token == "" {
		err = errors.Join(err, keyErr("aggregator.indexer", "(address and token) is required when a toolOverrides entry sets taskSupport: tasks are kept by the indexer"))
	}
	return err
}

// RunsTasks reports whether any tool override lets a tool run as a task.
func (c *Config) RunsTasks() bool {
	lists := [][]ToolOverride{c.Aggregator.ToolOverrides}
	for _, s := range c.Servers {
		lists = append(lists, s.ToolOverrides)
	}
	for _, list := range lists {
		for _, o := range list {
			if o.TaskSupport == TaskSupportOptional || o.TaskSupport == TaskSupportRequired {
				return true
			}
		}
	}
	return false
}
