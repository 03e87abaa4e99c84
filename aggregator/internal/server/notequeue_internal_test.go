package server

import (
	"strings"
	"testing"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// A caller that stops reading a streamed call holds back at most
// maxQueuedNoteBytes of its notifications, however large each one is (a
// backend's message may be 32 MiB): past it they are dropped, as past
// maxQueuedNotes, and queued again once the caller has read.
func TestNoteQueueBoundsBytes(t *testing.T) {
	release := make(chan struct{})
	sent := make(chan string, 8)
	q := newNoteQueue(func(n *aggregatorv1.Notification) error {
		if n.GetMethod() == "big-1" {
			<-release // the caller stops reading
		}
		sent <- n.GetMethod()
		return nil
	})
	put := func(name, params string) {
		t.Helper()
		if err := q.put(&aggregatorv1.Notification{Method: name, ParamsJson: params}); err != nil {
			t.Fatal(err)
		}
	}
	big := strings.Repeat("x", maxQueuedNoteBytes/2+1)
	put("big-1", big)
	put("big-2", big) // two would hold more than the bound
	put("small", "{}")
	close(release)
	if got := <-sent; got != "big-1" {
		t.Fatalf("sent %s first, want big-1", got)
	}
	if got := <-sent; got != "small" {
		t.Fatalf("sent %s after big-1, want small: big-2 is past the bound", got)
	}
	put("big-3", big) // the caller read the others: it fits again
	q.close()
	close(sent)
	var rest []string
	for name := range sent {
		rest = append(rest, name)
	}
	if strings.Join(rest, " ") != "big-3" {
		t.Fatalf("sent %v at the end, want big-3", rest)
	}
}
