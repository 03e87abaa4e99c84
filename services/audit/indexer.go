package audit

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// IndexerSink ships batches to the indexer's RecordAuditEvents, which
// stores them in PostgreSQL (audit.database.enabled): the sink of the
// services that have no database of their own.
type IndexerSink struct {
	client indexerv1.IndexerServiceClient
}

// NewIndexerSink ships through client, whose credential the indexer must
// allow RecordAuditEvents.
func NewIndexerSink(client indexerv1.IndexerServiceClient) *IndexerSink {
	return &IndexerSink{client: client}
}

// Name labels the sink.
func (*IndexerSink) Name() string { return "indexer" }

// Write sends the batch in one request (batches are at most 256 events,
// within the RPC's 1,000), each event fitted to the table's bounds: the
// indexer refuses a whole request for one event past them. The writer
// fitted its events already (Fit is idempotent); a batch written to the
// sink directly is fitted here.
func (s *IndexerSink) Write(ctx context.Context, batch []Event) error {
	req := &indexerv1.RecordAuditEventsRequest{Events: make([]*indexerv1.AuditEvent, len(batch))}
	for i := range batch {
		fitted := Fit(batch[i])
		req.Events[i] = ToProto(&fitted)
	}
	_, err := s.client.RecordAuditEvents(ctx, req)
	return err
}

// Close does nothing: the connection is the caller's.
func (*IndexerSink) Close() error { return nil }

// ToProto is an event as RecordAuditEvents takes it and QueryAuditEvents
// answers it.
func ToProto(e *Event) *indexerv1.AuditEvent {
	return &indexerv1.AuditEvent{Time: timestamppb.New(e.Time), Service: e.Service, Kind: string(e.Kind), Outcome: string(e.Outcome),
		Subject: e.Subject, Groups: e.Groups, Server: e.Server, Tool: e.Tool, Resource: e.Resource, Prompt: e.Prompt,
		Backend: e.Backend, LatencyMs: e.LatencyMS, TraceId: e.TraceID, Session: e.Session, ArgumentsSha256: e.ArgumentsSHA256,
		ArgumentsJson: string(e.Arguments), Detail: e.Detail, Caller: e.Caller, Via: e.Via}
}
