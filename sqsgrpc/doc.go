// Package sqsgrpc carries gRPC over SQS request/response: services
// registered on a Server answer from a request queue with
// responder.Serve, and generated clients call them through a ClientConn,
// unchanged:
//
//	// the service
//	srv := sqsgrpc.NewServer()
//	healthpb.RegisterHealthServer(srv, health.NewServer())
//	err := resp.Serve(ctx, queueURL, srv.Handler())
//	// the caller
//	client := healthpb.NewHealthClient(sqsgrpc.NewClientConn(r, queueURL))
//
// All four kinds of RPC are supported: a unary call is one request and
// one reply (requester.SendMessageAndGetResponse); a client-streaming or
// bidirectional call is a session (requester.OpenSession): each message
// the client sends reaches the handler's RecvMsg in order, and the
// responses reach the client as the handler sends them, concurrently; a
// server-streaming call is a half-closed session. grpc-go's interop cases
// pass over SQS (interop_test.go). Cancelling a streaming call, or its
// deadline passing, cancels the handler's context within about one SQS
// round trip, and its request is finished, not retried.
//
// The method, the outgoing metadata, the caller's deadline, the codec's
// name and the request message travel in one message body; the header,
// the responses, the trailer and the status (with its details) come back
// (docs/adapters.md, docs/wire.md); a streaming call's messages follow in
// its session. The context's deadline is the call's timeout and bounds the
// handler, whose deadline is earlier by the reply's travel back; a request that expired before it was received is
// deleted unhandled. Client and server interceptors
// (unary and stream) run as under grpc. Messages use the codec the call
// options name (grpc.ForceCodec, grpc.ForceCodecV2,
// grpc.CallContentSubtype), proto by default; the server looks the
// codec up by its name in grpc's registry.
//
// A message too large for one SQS message as it is sent (base64 in the
// envelope, gzipped for a reply when the client reads that) goes through
// a payload store when both sides set one (ClientConnOptions and
// ServerOptions.PayloadStore; the nested module s3payload has one on S3),
// up to 64 MiB, raw; the client deletes it once the call is done with it
// (docs/s3.md). Message sizes are limited as grpc limits them: 4 MiB
// received unless grpc.MaxCallRecvMsgSize (a call option) or
// ServerOptions.MaxRecvMsgSize raises it, and what
// grpc.MaxCallSendMsgSize and ServerOptions.MaxSendMsgSize allow sent.
//
// Errors are status errors. A failure of the transport maps to a code and
// wraps the library's error: errors.Is(err, requester.ErrTimeout) holds
// for codes.DeadlineExceeded, sqsapi.ErrClosed for codes.Unavailable,
// and sqsapi.ErrInvalidInput for bad input refused before any call
// (codes.InvalidArgument, or codes.ResourceExhausted for a message too
// large for SQS).
//
// This module uses only the public API of github.com/tempqueues/tempqueues
// and lives in its own module so that grpc is no dependency of the rest.
package sqsgrpc
