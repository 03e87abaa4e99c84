package codemode

import (
	"fmt"
	"slices"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Steps taken inside built-ins. Starlark counts a step, and notices a
// cancellation, between the interpreter's instructions only: a loop
// inside a built-in (max, any, sorted or sum over a range) is one step
// however long it runs, so neither maxSteps nor the timeout stopped it,
// and the runner held a core until the pool killed it after the grace.
// A range takes no memory however long it is, which makes it the one way
// a few characters make such a loop endless (anything else iterated
// takes memory in proportion, which maxMemory bounds). So each element a
// range yields is a step, and a range yields nothing more once the
// program reached a bound, which the interpreter then raises at its next
// instruction. sum counts its elements the same way.

// A backstop for every other loop a built-in runs: hashing a tuple that
// holds itself nested sixty times over costs 2^60 steps of Go in one of
// Starlark's and no memory, and sorting or comparing large values can
// take long in one too. Once a bound is reached, a program that has not
// stopped within backstopGrace is reported as stopped at it, and the
// runner marked spent, so that the pool ends it (a runner cannot stop its
// own goroutine) instead of it holding a core until its kill after the
// grace the pool gives.
const backstopGrace = 500 * time.Millisecond

func (p *program) stopBackstop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.backstop != nil {
		p.backstop.Stop()
	}
}

// reportStuck reports a program that did not stop after its bound, unless
// it ended meanwhile.
func (p *program) reportStuck() {
	if !p.ended.CompareAndSwap(false, true) {
		return
	}
	bound, msg := p.reached()
	p.mu.Lock()
	printed := slices.Clone(p.printed)
	p.mu.Unlock()
	// Its steps are the program goroutine's to count; the pool adds the
	// calls it counted.
	_ = p.c.write(fromRunner{Done: &Result{Bound: bound, Error: msg, Printed: printed, Spent: true}})
}

// stepsExceeded stops the program for taking more than maxSteps.
func (p *program) stepsExceeded() {
	_ = p.reach(BoundSteps, fmt.Sprintf("the program ran more than %d steps (aggregator.codeMode.maxSteps)", p.req.Bounds.MaxSteps))
}

// step counts a step taken inside a built-in; false once the program
// has reached a bound (this step may be the one that reaches maxSteps).
func (p *program) step() bool {
	p.builtinSteps++
	if limit := p.req.Bounds.MaxSteps; limit > 0 && p.thread.ExecutionSteps()+p.builtinSteps > limit {
		p.stepsExceeded()
	}
	return !p.stopped.Load()
}

// steps is every step the program took.
func (p *program) steps() uint64 { return p.thread.ExecutionSteps() + p.builtinSteps }

// rangeBuiltin is range, whose value counts its elements as steps.
func (p *program) rangeBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	r, err := starlark.Call(thread, starlark.Universe["range"], args, kwargs)
	if err != nil {
		return nil, err
	}
	return &countedRange{Value: r, p: p}, nil
}

// countedRange is Starlark's range, of which it is a wrapper, but for
// its iteration, which counts steps.
type countedRange struct {
	starlark.Value
	p *program
}

var (
	_ starlark.Sliceable  = (*countedRange)(nil)
	_ starlark.Sequence   = (*countedRange)(nil)
	_ starlark.Comparable = (*countedRange)(nil)
	_ starlark.Container  = (*countedRange)(nil)
)

func (r *countedRange) Len() int                   { return r.Value.(starlark.Sequence).Len() }
func (r *countedRange) Index(i int) starlark.Value { return r.Value.(starlark.Indexable).Index(i) }
func (r *countedRange) Has(y starlark.Value) (bool, error) {
	return r.Value.(starlark.Container).Has(y)
}

func (r *countedRange) Slice(start, end, step int) starlark.Value {
	return &countedRange{Value: r.Value.(starlark.Sliceable).Slice(start, end, step), p: r.p}
}

func (r *countedRange) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	return r.Value.(starlark.Comparable).CompareSameType(op, y.(*countedRange).Value, depth)
}

func (r *countedRange) Iterate() starlark.Iterator {
	return countedIterator{Iterator: r.Value.(starlark.Iterable).Iterate(), p: r.p}
}

type countedIterator struct {
	starlark.Iterator
	p *program
}

func (it countedIterator) Next(v *starlark.Value) bool { return it.p.step() && it.Iterator.Next(v) }

// sum is Python's sum(iterable, start=0), which Starlark lacks and models
// reach for; each element is a step.
func (p *program) sum(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var iterable starlark.Iterable
	var acc starlark.Value = starlark.MakeInt(0)
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "iterable", &iterable, "start?", &acc); err != nil {
		return nil, err
	}
	it := iterable.Iterate()
	defer it.Done()
	var x starlark.Value
	for p.step() && it.Next(&x) {
		var err error
		if acc, err = starlark.Binary(syntax.PLUS, acc, x); err != nil {
			return nil, fmt.Errorf("%s: %v", b.Name(), err)
		}
	}
	return acc, nil
}
