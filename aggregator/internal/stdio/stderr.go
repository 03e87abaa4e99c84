package stdio

import (
	"bytes"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"
)

// Bounds of what the process's stderr costs: a line is cut at
// maxLineBytes, and past maxLinesPerMinute a minute's further lines are
// counted, not logged.
const (
	maxLineBytes      = 1024
	maxLinesPerMinute = 120
)

// lineLog logs what a process writes to stderr (or the lines of its
// stdout that are not messages), a line at a time, bounded.
type lineLog struct {
	log    *slog.Logger
	redact func(string) string
	// stream names it in the log: stderr or stdout.
	stream string

	mu      sync.Mutex
	buf     []byte
	window  time.Time
	lines   int
	dropped int
}

func newLineLog(log *slog.Logger, redact func(string) string, stream string) *lineLog {
	if redact == nil {
		redact = func(s string) string { return s }
	}
	return &lineLog{log: log, redact: redact, stream: stream}
}

// lineKeep is how much of a line is buffered: one byte past its bound, to
// know it was cut, and room for a secret that crosses the bound, so that
// none is cut in two before it is redacted (a credential of up to 8 KiB:
// a PEM private key fits).
const lineKeep = maxLineBytes + 1 + 8<<10

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		end := i
		if i < 0 {
			end = len(p)
		}
		room := max(0, lineKeep-len(l.buf))
		l.buf = append(l.buf, p[:min(end, room)]...)
		if i < 0 {
			return n, nil
		}
		l.emitLocked()
		p = p[i+1:]
	}
	return n, nil
}

// Flush logs a last line without its newline.
func (l *lineLog) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emitLocked()
	}
	l.reportDroppedLocked()
}

// reportDroppedLocked logs how many lines went unlogged since the last
// report, if any.
func (l *lineLog) reportDroppedLocked() {
	if l.dropped > 0 {
		l.log.Warn("stdio server's "+l.stream+": lines not logged (over the bound)", "lines", l.dropped)
		l.dropped = 0
	}
}

func (l *lineLog) emitLocked() {
	line := l.buf
	l.buf = l.buf[:0]
	now := time.Now()
	if now.Sub(l.window) > time.Minute {
		l.reportDroppedLocked()
		l.window, l.lines = now, 0
	}
	if l.lines >= maxLinesPerMinute {
		l.dropped++
		return
	}
	l.lines++
	// Secrets go before the line is cut, so that none is cut in two.
	line = []byte(l.redact(string(line)))
	cut := len(line) > maxLineBytes
	if cut {
		line = line[:maxLineBytes]
		for len(line) > 0 && !utf8.Valid(line) {
			line = line[:len(line)-1]
		}
	}
	l.log.Info("stdio server", l.stream, string(line), "cut", cut)
}
