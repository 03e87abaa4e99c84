package store

import (
	"context"
	"errors"
	"time"
)

// ToolDefinitions keeps, per backend tool, the digest of its definition
// that aggregators in pin mode list it with (the approved one) and the
// one last seen, so that every aggregator replica agrees on which tools
// changed after they were first seen (docs/operations.md, "Pinned tool
// definitions").
type ToolDefinitions interface {
	// RecordToolDefinitions records the digests seen and returns each
	// tool's record, in the order given (under concurrent recorders of
	// other digests, its SeenDigest may already be another's: compare
	// ApprovedDigest with the digest recorded). The first digest ever recorded
	// for a (backend, tool), through any handle, becomes its approved
	// one, unless the digest is PendingIfNew and its backend has other
	// tools recorded already: then the tool is recorded with no approved
	// digest, pending until approved. A later record only updates the
	// seen digest and time. Each
	// (backend, tool) appears at most once in digests. A Definition given
	// with a pending digest is kept with the record (SeenDefinition) until
	// the tool is approved or its seen digest changes; with a digest that
	// is approved, or not the one seen, it is ignored. The first
	// Definition kept for a seen digest stays: one given later with the
	// same digest, through any handle, does not replace it (the caller
	// checks that a Definition hashes to its Digest).
	RecordToolDefinitions(ctx context.Context, digests []ToolDefinitionDigest) ([]ToolDefinition, error)
	// ApproveToolDefinition makes digest the approved digest of (backend,
	// tool), recording who approved it, and reports whether anything
	// changed. A tool never recorded is ErrToolDefinitionNotFound; a
	// digest that is not the latest seen one is ErrToolDefinitionChanged.
	// An approval is announced to ListenToolApprovals.
	ApproveToolDefinition(ctx context.Context, d ToolDefinitionDigest, by string) (ToolDefinition, bool, error)
	// ListToolDefinitions lists the records after the key (backend, tool)
	// in that order, the pending ones only unless includeApproved, at most
	// limit.
	ListToolDefinitions(ctx context.Context, includeApproved bool, afterBackend, afterTool string, limit int) ([]ToolDefinition, error)
	// ListenToolApprovals follows approvals made through any handle on
	// the same backing store, as ListenRevocations follows revocations:
	// listening once it follows, then approved for each approval, until
	// ctx ends or the connection fails; it always returns an error.
	ListenToolApprovals(ctx context.Context, listening func(), approved func(ToolDefinitionDigest)) error
}

// ToolDefinitionDigest is the digest of one backend tool's definition,
// and, when recorded, optionally the definition itself (its JSON object).
type ToolDefinitionDigest struct {
	Backend, Tool, Digest string
	Definition            string
	// PendingIfNew records a tool seen for the first time as pending when
	// its backend has tools recorded already (RecordToolDefinitions).
	PendingIfNew bool
}

// ToolDefinition is the record of one backend tool's definition.
type ToolDefinition struct {
	Backend, Tool              string
	ApprovedDigest, SeenDigest string
	// SeenDefinition is the pending definition as reported, or empty.
	SeenDefinition      string
	FirstSeen, LastSeen time.Time
	// ApprovedAt is zero and ApprovedBy empty until an operator approves
	// a definition.
	ApprovedAt time.Time
	ApprovedBy string
}

// Pending reports whether the seen definition is not the approved one.
func (d ToolDefinition) Pending() bool { return d.SeenDigest != d.ApprovedDigest }

var (
	// ErrToolDefinitionNotFound means the tool was never recorded.
	ErrToolDefinitionNotFound = errors.New("no such tool definition recorded")
	// ErrToolDefinitionChanged means an approval named a digest other
	// than the latest seen one.
	ErrToolDefinitionChanged = errors.New("the digest is not the latest seen definition of the tool")
)
