package grpcapi

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/switchboard-mcp/switchboard/test/grpcapi/example"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// rawCodec sends and receives message bytes as they are, so that a test
// can send what a non-Go client (or a broken one) may put on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)   { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error { *(v.(*[]byte)) = b; return nil }
func (rawCodec) Name() string                    { return "proto" }

// A request the server cannot decode (a string field holding invalid
// UTF-8, or bytes that are no protobuf message) is the client's mistake:
// INVALID_ARGUMENT with ERROR_REASON_INVALID_ARGUMENT, as every refusal
// carries an ErrorInfo, on every service and for unary and streamed calls
// alike, not an INTERNAL a client cannot tell from a server's bug.
func TestUndecodableRequestIsInvalidArgument(t *testing.T) {
	c := harness.Start(t, harness.Options{
		Backends:  []harness.Backend{{Name: "demo"}},
		Configure: addReportingClient,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := withToken(ctx, reportingToken)
	agg := dialRaw(t, c.Config.Aggregator.Listen)
	idx := dialRaw(t, c.Config.Indexer.Listen)
	var badName []byte // field 2 (name, query) holding invalid UTF-8
	badName = protowire.AppendTag(badName, 2, protowire.BytesType)
	badName = protowire.AppendString(badName, "demo_\xff")
	notProtobuf := []byte{0xff, 0xff, 0xff}
	for _, m := range []struct {
		conn   *grpc.ClientConn
		method string
		stream bool
		body   []byte
	}{
		{agg, "/switchboard.aggregator.v1.AggregatorService/CallTool", false, badName},
		{idx, "/switchboard.indexer.v1.IndexerService/Search", false, badName},
		{agg, "/switchboard.aggregator.v1.AggregatorService/CallTool", false, notProtobuf},
		{agg, "/switchboard.aggregator.v1.AggregatorService/CallToolStream", true, notProtobuf},
	} {
		var err error
		if m.stream {
			err = invokeServerStream(client, m.conn, m.method, m.body)
		} else {
			var out []byte
			err = m.conn.Invoke(client, m.method, &m.body, &out, grpc.ForceCodec(rawCodec{}))
		}
		if status.Code(err) != codes.InvalidArgument || example.Reason(err) != "ERROR_REASON_INVALID_ARGUMENT" {
			t.Errorf("%s with an undecodable request %x: %s; want INVALID_ARGUMENT with ERROR_REASON_INVALID_ARGUMENT", m.method, m.body, describe(err))
		}
	}
}

// invokeServerStream sends body as the one request of a server-streaming
// method and returns the error its first answer ends with.
func invokeServerStream(ctx context.Context, conn *grpc.ClientConn, method string, body []byte) error {
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	if err := st.SendMsg(&body); err != nil {
		return err
	}
	if err := st.CloseSend(); err != nil {
		return err
	}
	var out []byte
	return st.RecvMsg(&out)
}
