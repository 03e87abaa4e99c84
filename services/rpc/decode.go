package rpc

import (
	"context"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// A request the server cannot decode (bytes that are no protobuf message
// of its type, a string field that is not UTF-8) is the caller's mistake,
// and a refusal like any other: INVALID_ARGUMENT with the ErrorInfo every
// refusal carries. gRPC would answer it INTERNAL without details: its
// receive path turns a codec's error into a status of its own and sends
// it at once, before a unary call's interceptors run and whatever a
// stream's handler returns. So a Server's codec (requestCodec) does not
// fail a message: it notes why it could not decode it, and the handlers of
// every service a Server serves (Server.RegisterService) answer the note.

// undecodable holds, by the message decoded into, why requestCodec could
// not decode it, from the codec's Unmarshal to the handler's check of the
// same message (withDecodeErrors), which removes it.
var undecodable sync.Map

// requestCodec is gRPC's protobuf codec whose Unmarshal notes its error in
// undecodable instead of returning it.
type requestCodec struct{ encoding.CodecV2 }

func newRequestCodec() requestCodec { return requestCodec{encoding.GetCodecV2(proto.Name)} }

func (c requestCodec) Unmarshal(data mem.BufferSlice, m any) error {
	if err := c.CodecV2.Unmarshal(data, m); err != nil {
		undecodable.Store(m, err)
	}
	return nil
}

// decoded is the error of receiving m: INVALID_ARGUMENT when the codec
// could not decode it, else err.
func decoded(m any, err error) error {
	if cause, ok := undecodable.LoadAndDelete(m); ok {
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
			"the request could not be decoded: "+cause.(error).Error())
	}
	return err
}

// withDecodeErrors is sd with each handler's received messages checked
// by decoded.
func withDecodeErrors(sd *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := *sd
	out.Methods = slices.Clone(sd.Methods)
	for i := range out.Methods {
		handler := out.Methods[i].Handler
		out.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			return handler(srv, ctx, func(m any) error { return decoded(m, dec(m)) }, interceptor)
		}
	}
	out.Streams = slices.Clone(sd.Streams)
	for i := range out.Streams {
		handler := out.Streams[i].Handler
		out.Streams[i].Handler = func(srv any, ss grpc.ServerStream) error {
			return handler(srv, decodingStream{ss})
		}
	}
	return &out
}

// decodingStream checks each message a stream receives by decoded.
type decodingStream struct{ grpc.ServerStream }

func (s decodingStream) RecvMsg(m any) error { return decoded(m, s.ServerStream.RecvMsg(m)) }
