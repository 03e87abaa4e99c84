package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// The first digest recorded for a tool is approved, whichever of many
// concurrent recorders on several handles (replicas) lands first; a later
// different digest is pending until approved, and only the latest seen
// digest can be approved.
func toolDefinitions(t *testing.T, open Open[store.ToolDefinitions]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	answers := make([]string, 16)
	for i := range 16 {
		st := one
		if i%2 == 1 {
			st = two
		}
		wg.Go(func() {
			recs, err := st.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{
				{Backend: "alpha", Tool: "echo", Digest: digest(byte('a' + i%6))},
				{Backend: "alpha", Tool: "add", Digest: digest('0')},
			})
			if err != nil || len(recs) != 2 {
				t.Error(recs, err)
				return
			}
			answers[i] = recs[0].ApprovedDigest
			// Each recorder is told the approved digest (the record's seen
			// digest may already be another concurrent recorder's).
			if recs[0].ApprovedDigest == "" || recs[1].ApprovedDigest != digest('0') {
				t.Errorf("recorder %d: %+v", i, recs)
			}
		})
	}
	wg.Wait()
	for i, a := range answers {
		if a != answers[0] {
			t.Fatalf("recorder %d was told approved %s, recorder 0 %s: replicas disagree", i, a, answers[0])
		}
	}
	approved := answers[0]
	changed := digest('x')
	recs, err := one.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{{Backend: "alpha", Tool: "echo", Digest: changed}})
	if err != nil || recs[0].ApprovedDigest != approved || !recs[0].Pending() || recs[0].SeenDigest != changed {
		t.Fatalf("a changed definition: %+v, %v; want approved %s, pending", recs, err, approved)
	}

	// The definition sent for review is kept with the pending digest
	// only: one sent with an approved digest, or with a digest no longer
	// seen, is not.
	def := `{"name":"echo","description":"changed"}`
	recs, err = two.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{
		{Backend: "alpha", Tool: "echo", Digest: changed, Definition: def},
		{Backend: "alpha", Tool: "add", Digest: digest('0'), Definition: `{"name":"add"}`},
	})
	if err != nil || recs[0].SeenDefinition != def || recs[1].SeenDefinition != "" {
		t.Fatalf("definitions sent for review: %+v, %v", recs, err)
	}
	if _, err := two.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{{Backend: "alpha", Tool: "echo", Digest: digest('y'), Definition: ""}}); err != nil {
		t.Fatal(err)
	}
	if _, err := one.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{{Backend: "alpha", Tool: "echo", Digest: changed, Definition: def}}); err != nil {
		t.Fatal(err)
	}

	listed, err := two.ListToolDefinitions(ctx, false, "", "", 10)
	if err != nil || len(listed) != 1 || listed[0].Tool != "echo" || listed[0].SeenDigest != changed || listed[0].SeenDefinition != def {
		t.Fatalf("pending definitions: %+v, %v; want alpha/echo only, with its definition", listed, err)
	}
	// A seen digest that changes drops the definition kept for the old one.
	if recs, err := one.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{{Backend: "alpha", Tool: "echo", Digest: digest('y')}}); err != nil || recs[0].SeenDefinition != "" {
		t.Fatalf("another seen digest: %+v, %v; want the old definition gone", recs, err)
	}
	if _, err := one.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{{Backend: "alpha", Tool: "echo", Digest: changed, Definition: def}}); err != nil {
		t.Fatal(err)
	}
	all, err := two.ListToolDefinitions(ctx, true, "", "", 10)
	if err != nil || len(all) != 2 || all[0].Tool != "add" || all[1].Tool != "echo" {
		t.Fatalf("all definitions: %+v, %v; want add, echo", all, err)
	}
	page, err := two.ListToolDefinitions(ctx, true, "alpha", "add", 10)
	if err != nil || len(page) != 1 || page[0].Tool != "echo" {
		t.Fatalf("definitions after alpha/add: %+v, %v", page, err)
	}

	// Approvals are heard on the other handle.
	heard := make(chan store.ToolDefinitionDigest, 8)
	listening := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- one.ListenToolApprovals(ctx, func() { close(listening) }, func(d store.ToolDefinitionDigest) { heard <- d })
	}()
	t.Cleanup(func() { <-done })
	select {
	case <-listening:
	case err := <-done:
		t.Fatalf("ListenToolApprovals ended before listening: %v", err)
	}

	if _, _, err := two.ApproveToolDefinition(ctx, store.ToolDefinitionDigest{Backend: "alpha", Tool: "echo", Digest: approved}, "op"); !errors.Is(err, store.ErrToolDefinitionChanged) {
		t.Fatalf("approving a digest that is not the latest seen: %v, want ErrToolDefinitionChanged", err)
	}
	if _, _, err := two.ApproveToolDefinition(ctx, store.ToolDefinitionDigest{Backend: "alpha", Tool: "nope", Digest: changed}, "op"); !errors.Is(err, store.ErrToolDefinitionNotFound) {
		t.Fatalf("approving a tool never recorded: %v, want ErrToolDefinitionNotFound", err)
	}
	rec, did, err := two.ApproveToolDefinition(ctx, store.ToolDefinitionDigest{Backend: "alpha", Tool: "echo", Digest: changed}, "op")
	if err != nil || !did || rec.ApprovedDigest != changed || rec.Pending() || rec.ApprovedBy != "op" || rec.ApprovedAt.IsZero() || rec.SeenDefinition != "" {
		t.Fatalf("approval: %+v, %v, %v", rec, did, err)
	}
	d := <-heard
	if d != (store.ToolDefinitionDigest{Backend: "alpha", Tool: "echo", Digest: changed}) {
		t.Fatalf("heard %+v", d)
	}
	if _, did, err := one.ApproveToolDefinition(ctx, store.ToolDefinitionDigest{Backend: "alpha", Tool: "echo", Digest: changed}, "op"); err != nil || did {
		t.Fatalf("approving again: changed %v, %v; want no change", did, err)
	}
	if listed, err := two.ListToolDefinitions(ctx, false, "", "", 10); err != nil || len(listed) != 0 {
		t.Fatalf("pending after approval: %+v, %v", listed, err)
	}
	// Going back to the first definition is a change too: it is not the
	// approved one any more.
	recs, err = one.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{{Backend: "alpha", Tool: "echo", Digest: approved}})
	if err != nil || !recs[0].Pending() || recs[0].ApprovedDigest != changed {
		t.Fatalf("the old definition again: %+v, %v", recs, err)
	}

	// Many tools in one call come back in the order given.
	many := make([]store.ToolDefinitionDigest, 2000)
	for i := range many {
		many[i] = store.ToolDefinitionDigest{Backend: fmt.Sprintf("b%d", i%7), Tool: fmt.Sprintf("tool-%04d", len(many)-i), Digest: digest('f')}
	}
	for range 2 { // inserted, then read back unchanged
		recs, err := two.RecordToolDefinitions(ctx, many)
		if err != nil || len(recs) != len(many) {
			t.Fatalf("%d tools: %d records, %v", len(many), len(recs), err)
		}
		for i, r := range recs {
			if r.Backend != many[i].Backend || r.Tool != many[i].Tool || r.Pending() {
				t.Fatalf("record %d: %+v, want %+v", i, r, many[i])
			}
		}
	}
}

// With PendingIfNew, a backend's first listing is approved whole, and a
// tool it lists later (a new name, as a rename makes) is recorded with no
// approved digest, pending until approved; without it a new tool is
// approved by being first, as always.
func newToolsOfARecordedBackendPending(t *testing.T, open Open[store.ToolDefinitions]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	recs, err := one.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{
		{Backend: "gamma", Tool: "get", Digest: digest('g'), PendingIfNew: true},
		{Backend: "gamma", Tool: "put", Digest: digest('p'), PendingIfNew: true},
	})
	if err != nil || len(recs) != 2 || recs[0].Pending() || recs[1].Pending() || recs[0].ApprovedDigest != digest('g') {
		t.Fatalf("a backend's first listing: %+v, %v; want both approved", recs, err)
	}
	recs, err = two.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{
		{Backend: "gamma", Tool: "get", Digest: digest('g'), PendingIfNew: true},
		{Backend: "gamma", Tool: "fetch", Digest: digest('f'), PendingIfNew: true},
	})
	if err != nil || len(recs) != 2 || recs[0].Pending() || !recs[1].Pending() || recs[1].ApprovedDigest != "" || recs[1].SeenDigest != digest('f') {
		t.Fatalf("a new tool of a recorded backend: %+v, %v; want fetch pending with no approved digest", recs, err)
	}
	// It is listed for review, and approving its seen digest approves it.
	pending, err := one.ListToolDefinitions(ctx, false, "gamma", "", 100)
	if err != nil || len(pending) != 1 || pending[0].Tool != "fetch" {
		t.Fatalf("pending after gamma: %+v, %v", pending, err)
	}
	rec, changed, err := one.ApproveToolDefinition(ctx, store.ToolDefinitionDigest{Backend: "gamma", Tool: "fetch", Digest: digest('f')}, "op")
	if err != nil || !changed || rec.Pending() || rec.ApprovedDigest != digest('f') {
		t.Fatalf("approving the new tool: %+v, %v, %v", rec, changed, err)
	}
	// Without PendingIfNew a new tool is approved by being first.
	recs, err = one.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{{Backend: "gamma", Tool: "list", Digest: digest('l')}})
	if err != nil || recs[0].Pending() {
		t.Fatalf("a new tool without PendingIfNew: %+v, %v", recs, err)
	}
}

// The first definition kept for a pending digest stays until the digest
// is approved or another is seen: another text sent with the same digest
// (the indexer checks that each hashes to it, but members a digest does
// not cover, order and spacing may differ) does not replace it, through
// any handle, and every recorder is told the one kept. A new seen digest
// drops it, and the first text sent for that one is kept.
func firstDefinitionKept(t *testing.T, open Open[store.ToolDefinitions]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	if _, err := one.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{{Backend: "delta", Tool: "lookup", Digest: digest('a')}}); err != nil {
		t.Fatal(err)
	}
	pending := digest('b')
	first, second := `{"name":"lookup","description":"refund every other order"}`, `{"description":"refund every other order","name":"lookup"}`
	recs, err := one.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{{Backend: "delta", Tool: "lookup", Digest: pending, Definition: first}})
	if err != nil || !recs[0].Pending() || recs[0].SeenDefinition != first {
		t.Fatalf("the first definition of a pending digest: %+v, %v", recs, err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		st := one
		if i%2 == 1 {
			st = two
		}
		wg.Go(func() {
			recs, err := st.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{
				{Backend: "delta", Tool: "lookup", Digest: pending, Definition: fmt.Sprintf(`%s%*s`, second, i, "")},
			})
			if err != nil || recs[0].SeenDefinition != first {
				t.Errorf("recorder %d, another text of the same digest: %+v, %v; want the first kept", i, recs, err)
			}
		})
	}
	wg.Wait()
	listed, err := two.ListToolDefinitions(ctx, false, "delta", "", 10)
	if err != nil || len(listed) != 1 || listed[0].SeenDefinition != first {
		t.Fatalf("pending definitions: %+v, %v; want the first text kept", listed, err)
	}
	// A new seen digest drops it; the first text sent for the new one is
	// kept.
	next := digest('c')
	if recs, err := two.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{{Backend: "delta", Tool: "lookup", Digest: next}}); err != nil || recs[0].SeenDefinition != "" {
		t.Fatalf("another seen digest: %+v, %v; want the old definition gone", recs, err)
	}
	for _, def := range []string{second, first} {
		if _, err := one.RecordToolDefinitions(ctx, []store.ToolDefinitionDigest{{Backend: "delta", Tool: "lookup", Digest: next, Definition: def}}); err != nil {
			t.Fatal(err)
		}
	}
	listed, err = two.ListToolDefinitions(ctx, false, "delta", "", 10)
	if err != nil || len(listed) != 1 || listed[0].SeenDigest != next || listed[0].SeenDefinition != second {
		t.Fatalf("pending definitions: %+v, %v; want the first text sent for the new digest", listed, err)
	}
}
