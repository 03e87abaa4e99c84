package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// JSONLines writes each event as one line of JSON.
type JSONLines struct {
	name   string
	mu     sync.Mutex
	out    io.Writer
	closer io.Closer
}

// Stdout is the stdout sink: the process's standard output, which carries
// nothing but the trail (logs go to standard error).
func Stdout() *JSONLines { return &JSONLines{name: "stdout", out: os.Stdout} }

// OpenFile is the file sink, appending to path (created 0600: the trail
// says who called what).
func OpenFile(path string) (*JSONLines, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit.file: %w", err)
	}
	return &JSONLines{name: "file", out: f, closer: f}, nil
}

// NewJSONLines writes to out under name (tests, other writers).
func NewJSONLines(name string, out io.Writer) *JSONLines { return &JSONLines{name: name, out: out} }

// Name labels the sink.
func (j *JSONLines) Name() string { return j.name }

// Write writes the batch as one write of its lines, so lines of
// concurrent writers never interleave mid-line.
func (j *JSONLines) Write(_ context.Context, batch []Event) error {
	var b []byte
	for i := range batch {
		line, err := json.Marshal(&batch[i])
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, err := j.out.Write(b)
	return err
}

// Close closes the file of the file sink.
func (j *JSONLines) Close() error {
	if j.closer != nil {
		return j.closer.Close()
	}
	return nil
}
