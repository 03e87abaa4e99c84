package config

import (
	"errors"
	"fmt"
)

// Pinning modes (aggregator.pinning.mode).
const (
	// PinningOff records nothing and lists every tool as its backend
	// lists it.
	PinningOff = "off"
	// PinningWarn records every tool's definition digest and logs and
	// counts a tool whose definition changed after it was approved, but
	// keeps listing it.
	PinningWarn = "warn"
	// PinningPin quarantines such a tool until an operator approves its
	// new definition: it is not listed, not found and not callable.
	PinningPin = "pin"
)

// Pinning configures pinned tool definitions (docs/operations.md, "Pinned
// tool definitions"): protection against a backend that changes a tool's
// description or schema after it was reviewed.
type Pinning struct {
	// Mode is off (the default), warn or pin.
	Mode string `yaml:"mode"`
	// Indexer is where the digests are recorded (the indexer keeps them
	// in PostgreSQL, so every replica agrees); its token is the
	// aggregator's own credential, which the indexer must allow
	// AggregatorMethods. Required unless the mode is off.
	Indexer Endpoint `yaml:"indexer"`
	// NewTools is what a tool name a backend lists for the first time
	// gets once that backend has tools recorded: approve (the default:
	// its first definition is approved by being first) or review (it is
	// pending, so quarantined in pin mode, until an operator approves
	// it). A backend that renames a tool lists a new name, which approve
	// lets through unreviewed.
	NewTools string `yaml:"newTools"`
}

// What aggregator.pinning.newTools gives a new tool of a backend with
// tools recorded.
const (
	PinningNewToolsApprove = "approve"
	PinningNewToolsReview  = "review"
)

// ReviewNewTools reports whether new tools of a backend with tools
// recorded start pending (newTools review).
func (p Pinning) ReviewNewTools() bool { return p.NewTools == PinningNewToolsReview }

// EffectiveMode is the mode with the default applied.
func (p Pinning) EffectiveMode() string {
	if p.Mode == "" {
		return PinningOff
	}
	return p.Mode
}

// ValidateNewTools checks newTools alone: the indexer reads it too (it
// makes new tools pending on its own when it is review).
func (p Pinning) ValidateNewTools() error {
	switch p.NewTools {
	case "", PinningNewToolsApprove, PinningNewToolsReview:
		return nil
	default:
		return keyErr("aggregator.pinning.newTools", "want %s or %s", PinningNewToolsApprove, PinningNewToolsReview)
	}
}

// Validate checks the mode, newTools and, when the mode is not off, the
// indexer endpoint.
func (p Pinning) Validate() error {
	if err := p.ValidateNewTools(); err != nil {
		return err
	}
	switch p.EffectiveMode() {
	case PinningOff:
		return nil
	case PinningWarn, PinningPin:
	default:
		return keyErr("aggregator.pinning.mode", "want off, warn or pin")
	}
	if p.Indexer.Address == "" {
		return fmt.Errorf("aggregator.pinning.indexer.address is required with mode %s: the digests are kept by the indexer", p.Mode)
	}
	if p.Indexer.Token == "" {
		return errors.New("aggregator.pinning.indexer.token is required: the aggregator's own service credential")
	}
	return p.Indexer.ValidateAddress("aggregator.pinning.indexer.address")
}
