package sqsgrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// ClientConnOptions configure a ClientConn.
type ClientConnOptions struct {
	// UnaryInterceptors wrap every unary call, the first outermost, as
	// grpc.WithChainUnaryInterceptor does. Their *grpc.ClientConn
	// argument is nil: there is none.
	UnaryInterceptors []grpc.UnaryClientInterceptor
	// StreamInterceptors wrap every stream, the first outermost, as
	// grpc.WithChainStreamInterceptor does. Their *grpc.ClientConn
	// argument is nil.
	StreamInterceptors []grpc.StreamClientInterceptor
	// CallOptions apply to every call, before the call's own.
	CallOptions []grpc.CallOption
	// Timeout bounds calls whose context has no deadline, and then bounds
	// the handler too; default 30 s (the requester's default),
	// negative for none: the call then waits under the requester's
	// Options.Timeout and the handler runs without a deadline (a
	// server-streaming handler such as health's Watch until it returns on
	// its own).
	Timeout time.Duration
	// PayloadStore, if set, carries request messages too large for one
	// SQS message as they are (base64 in the envelope), up to 64 MiB: the
	// message goes to the store raw, and the server reads it from its own
	// ServerOptions.PayloadStore (the same store, or one on the same
	// bucket). It also tells the server that this client reads response
	// messages too large for one SQS message, even compressed, from the
	// store. A call's request messages are deleted when it ends, each
	// response message once read (docs/s3.md). nil (the default): such a
	// message fails with codes.ResourceExhausted, before any call.
	PayloadStore sqsapi.PayloadStore
}

// defaultTimeout bounds calls without a deadline: the requester's own
// default, which the handler then knows of.
const defaultTimeout = 30 * time.Second

// ClientConn is a grpc.ClientConnInterface that sends each RPC through a
// requester.Requester to a request queue served by a Server: generated
// clients take it in place of a *grpc.ClientConn, for RPCs of all four
// kinds. It is safe for concurrent use and holds nothing to close: close
// the requester.
type ClientConn struct {
	r        *requester.Requester
	queueURL string
	opts     ClientConnOptions
}

var _ grpc.ClientConnInterface = (*ClientConn)(nil)

// NewClientConn returns a ClientConn that sends RPCs to queueURL with r. A
// nil requester or an empty queue URL makes every call fail with
// codes.InvalidArgument, before any API call.
func NewClientConn(r *requester.Requester, queueURL string, optFns ...func(*ClientConnOptions)) *ClientConn {
	cc := &ClientConn{r: r, queueURL: queueURL}
	for _, fn := range optFns {
		fn(&cc.opts)
	}
	if cc.opts.Timeout == 0 {
		cc.opts.Timeout = defaultTimeout
	}
	return cc
}

// Invoke performs a unary RPC: one request message, one reply. The
// context's deadline (or ClientConnOptions.Timeout without one) is the
// call's timeout and bounds the handler (docs/wire.md, "Deadlines"); its
// outgoing metadata is the request's. grpc.Header and grpc.Trailer receive
// the response's metadata; grpc.ForceCodec, grpc.ForceCodecV2 and
// grpc.CallContentSubtype choose the codec (proto by default).
//
// Errors are status errors (status.FromError, status.Code): the handler's
// status with its details, or for a failure of the transport one that also
// wraps the requester's error (errors.Is(err, requester.ErrTimeout) with
// codes.DeadlineExceeded, sqsapi.ErrClosed with codes.Unavailable, an
// *sqsapi.InvalidInputError with codes.InvalidArgument or, for a message
// too large as it is sent, compressed with the requester's
// CompressRequests when that pays, codes.ResourceExhausted).
func (cc *ClientConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	opts = cc.callOpts(opts)
	// Interceptors take a *grpc.ClientConn, which this is not: they get
	// nil, and must not use it.
	call := grpc.UnaryInvoker(func(ctx context.Context, method string, args, reply any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
		return cc.invoke(ctx, method, args, reply, opts...)
	})
	for i := len(cc.opts.UnaryInterceptors) - 1; i >= 0; i-- {
		ic, next := cc.opts.UnaryInterceptors[i], call
		call = func(ctx context.Context, method string, args, reply any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
			return ic(ctx, method, args, reply, nil, next, opts...)
		}
	}
	return call(ctx, method, args, reply, nil, opts...)
}

func (cc *ClientConn) callOpts(opts []grpc.CallOption) []grpc.CallOption {
	if len(cc.opts.CallOptions) == 0 {
		return opts
	}
	return append(append(make([]grpc.CallOption, 0, len(cc.opts.CallOptions)+len(opts)), cc.opts.CallOptions...), opts...)
}

// withTimeout applies the default timeout to a context without a deadline.
func (cc *ClientConn) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || cc.opts.Timeout < 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, cc.opts.Timeout)
}

func (cc *ClientConn) invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	ctx, cancel := cc.withTimeout(ctx)
	defer cancel()
	ci := callOptions(opts)
	objs := cc.callObjects()
	defer objs.drop(ctx)
	in, err := cc.request(ctx, method, ci, args, objs)
	if err != nil {
		return err
	}
	m, err := cc.r.SendMessageAndGetResponse(ctx, in)
	if err != nil {
		return transportError(err)
	}
	f, err := decodeFrames(aws.ToString(m.Body))
	if err != nil || f.status == nil {
		return badReply(err)
	}
	if err := read(ctx, cc.opts.PayloadStore, slog.Default(), f, true); err != nil {
		return storeError(err)
	}
	for _, p := range ci.headers {
		*p = f.header
	}
	for _, p := range ci.trailers {
		*p = f.trailer
	}
	if f.status.Code() != codes.OK {
		return f.status.Err()
	}
	if len(f.msgs) != 1 {
		return status.Errorf(codes.Internal, "sqsgrpc: unary reply with %d messages", len(f.msgs))
	}
	if n := len(f.msgs[0]); n > ci.maxRecv {
		return recvTooLarge(n, ci.maxRecv)
	}
	if err := ci.codec.unmarshal(f.msgs[0], reply); err != nil {
		return status.Errorf(codes.Internal, "sqsgrpc: decoding the response: %v", err)
	}
	return nil
}

// request checks the call and encodes its request, before any API call:
// with args, or with none (args nil) for a call whose messages follow in
// its session.
func (cc *ClientConn) request(ctx context.Context, method string, ci *callInfo, args any, objs *callObjects) (*sqs.SendMessageInput, error) {
	switch {
	case cc.r == nil:
		return nil, invalid("requester", "nil")
	case cc.queueURL == "":
		return nil, invalid("queueURL", "empty")
	case ci.codecErr != nil:
		return nil, status.Errorf(codes.Internal, "sqsgrpc: %v", ci.codecErr)
	}
	var msg []byte
	var err error
	if args != nil {
		if msg, err = ci.codec.marshal(args); err != nil {
			return nil, status.Errorf(codes.Internal, "sqsgrpc: encoding the request: %v", err)
		}
		if len(msg) > ci.maxSend {
			return nil, sendTooLarge(len(msg), ci.maxSend)
		}
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	deadline, _ := ctx.Deadline()
	store := cc.opts.PayloadStore
	// Raw in the store rather than base64 in the message, when it does not
	// fit; the requester's compression (CompressRequests) is not tried
	// first. A message that cannot fit goes before it is encoded.
	offload := store != nil && args != nil && len(msg) <= maxStored
	var obj object
	if offload && frameLen(msg) > maxEnvelope {
		if obj, err = cc.putRequest(ctx, objs, msg, deadline); err != nil {
			return nil, err
		}
		msg = nil
	}
	body, err := encodeRequest(method, deadline, ci.codec.name, md, msg, args == nil, store != nil, obj)
	if err != nil {
		return nil, invalid("request", err.Error())
	}
	if offload && obj.key == "" && len(body) > maxEnvelope { // the metadata made it too large
		if obj, err = cc.putRequest(ctx, objs, msg, deadline); err != nil {
			return nil, err
		}
		if body, err = encodeRequest(method, deadline, ci.codec.name, md, nil, false, true, obj); err != nil {
			return nil, invalid("request", err.Error())
		}
	}
	if len(body) > maxRequest || store != nil && len(body) > maxEnvelope {
		return nil, &callError{st: status.New(codes.ResourceExhausted, errTooLarge("request", len(body)).Error()),
			err: &sqsapi.InvalidInputError{Op: "sqsgrpc", Param: "request", Reason: "too large for one SQS message"}}
	}
	return &sqs.SendMessageInput{QueueUrl: aws.String(cc.queueURL), MessageBody: aws.String(body)}, nil
}

// callError is a status error that wraps the library error it stands for.
type callError struct {
	st  *status.Status
	err error
}

func (e *callError) Error() string              { return e.st.Err().Error() }
func (e *callError) Unwrap() error              { return e.err }
func (e *callError) GRPCStatus() *status.Status { return e.st }

func invalid(param, reason string) error {
	err := &sqsapi.InvalidInputError{Op: "sqsgrpc", Param: param, Reason: reason}
	return &callError{st: status.New(codes.InvalidArgument, err.Error()), err: err}
}

// transportError maps a requester's error to a status.
func transportError(err error) error {
	code := codes.Unavailable
	var ie *sqsapi.InvalidInputError
	switch {
	case errors.Is(err, requester.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case tooLargeSent(err):
		code = codes.ResourceExhausted
	case errors.As(err, &ie):
		code = codes.InvalidArgument
	}
	return &callError{st: status.New(code, "sqsgrpc: "+err.Error()), err: err}
}

// putRequest puts a call's request message in ClientConnOptions.PayloadStore.
func (cc *ClientConn) putRequest(ctx context.Context, objs *callObjects, msg []byte, deadline time.Time) (object, error) {
	o, err := objs.put(ctx, msg, deadline)
	if err != nil {
		return object{}, storeError(fmt.Errorf("putting the request in ClientConnOptions.PayloadStore: %w", err))
	}
	return o, nil
}

// storeError is the status of a payload store's failure.
func storeError(err error) error {
	return &callError{st: status.New(codes.Unavailable, "sqsgrpc: "+err.Error()), err: err}
}

// callObjects returns the book of a new call's objects.
func (cc *ClientConn) callObjects() *callObjects {
	return &callObjects{store: cc.opts.PayloadStore, log: slog.Default()}
}

func badReply(err error) error {
	if err == nil {
		err = errors.New("no status")
	}
	return status.Errorf(codes.Internal, "sqsgrpc: the reply is not an sqsgrpc response: %v", err)
}

// NewStream begins a streaming RPC of any kind. A client-streaming or
// bidirectional call opens a session at once (its request carries the
// method and the metadata): SendMsg streams each message to the handler,
// CloseSend half-closes, and RecvMsg returns the responses as they
// arrive, concurrently with sending. A server-streaming call sends its
// request with SendMsg, in a half-closed session. Ending the stream early
// (cancelling its context, its deadline) cancels the handler's context
// within about one SQS round trip, as a real gRPC connection does.
func (cc *ClientConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	opts = cc.callOpts(opts)
	open := grpc.Streamer(func(ctx context.Context, desc *grpc.StreamDesc, _ *grpc.ClientConn, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return cc.newStream(ctx, desc, method, opts...)
	})
	for i := len(cc.opts.StreamInterceptors) - 1; i >= 0; i-- {
		ic, next := cc.opts.StreamInterceptors[i], open
		open = func(ctx context.Context, desc *grpc.StreamDesc, _ *grpc.ClientConn, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return ic(ctx, desc, nil, method, next, opts...)
		}
	}
	return open(ctx, desc, nil, method, opts...)
}

func (cc *ClientConn) newStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	sctx, cancel := cc.withTimeout(ctx)
	cs := &clientStream{cc: cc, ctx: ctx, sctx: sctx, cancel: cancel, method: method, ci: callOptions(opts), objs: cc.callObjects()}
	if desc != nil && desc.ClientStreams {
		cs.mu.Lock()
		err := cs.openLocked(nil)
		cs.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// clientStream is a streaming RPC's client side.
type clientStream struct {
	cc     *ClientConn
	ctx    context.Context    // the caller's, for Context
	sctx   context.Context    // with the default timeout, for the call
	cancel context.CancelFunc // releases sctx once the stream ended
	method string
	ci     *callInfo
	objs   *callObjects // the request messages it put in the store
	// sess, for a call whose client streams, is set before NewStream
	// returns: SendMsg uses it without the lock, while RecvMsg waits.
	sess *requester.Session

	mu       sync.Mutex
	s        *requester.Stream // once the request went
	header   metadata.MD
	headerOK bool // the header arrived (or the end)
	msgs     [][]byte
	trailer  metadata.MD
	end      error // io.EOF or the status error, once the status arrived
}

func (cs *clientStream) Context() context.Context { return cs.sctx }

// openLocked sends the request and opens its session: with msg for a
// server-streaming call (half-closed), without for one whose client
// streams.
func (cs *clientStream) openLocked(msg any) error {
	in, err := cs.cc.request(cs.sctx, cs.method, cs.ci, msg, cs.objs)
	if err != nil {
		cs.finish(nil, err)
		return err
	}
	sess, err := cs.cc.r.OpenSession(cs.sctx, in, func(o *requester.SessionOptions) { o.HalfClosed = msg != nil })
	if err != nil {
		err = transportError(err)
		cs.finish(nil, err)
		return err
	}
	cs.s = sess.Stream
	if msg == nil {
		cs.sess = sess
	}
	return nil
}

// SendMsg sends a request message: the request of a server-streaming
// call, or the next message of a client stream. As with grpc, it returns
// io.EOF once the stream ended (RecvMsg returns its status); a message
// too large for SQS as it is sent (compressed with the requester's
// CompressRequests when that pays) fails with codes.ResourceExhausted
// before any call.
func (cs *clientStream) SendMsg(m any) error {
	if cs.sess == nil {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if cs.s != nil {
			return status.Error(codes.Internal, "sqsgrpc: SendMsg called twice on a call whose client does not stream")
		}
		if cs.end != nil {
			return io.EOF
		}
		return cs.openLocked(m)
	}
	msg, err := cs.ci.codec.marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "sqsgrpc: encoding a request message: %v", err)
	}
	if len(msg) > cs.ci.maxSend {
		return sendTooLarge(len(msg), cs.ci.maxSend)
	}
	var body []byte
	if store := cs.objs.store; store != nil && frameLen(msg) > maxEnvelope && len(msg) <= maxStored {
		deadline, _ := cs.sctx.Deadline()
		o, err := cs.objs.put(cs.sctx, msg, deadline)
		switch {
		case errors.Is(err, errCallEnded):
			return io.EOF // RecvMsg says how
		case err != nil:
			return storeError(fmt.Errorf("putting a request message in ClientConnOptions.PayloadStore: %w", err))
		}
		body = append(o.appendFrame(nil), '\n')
	} else {
		body = appendMessageFrame(nil, msg)
	}
	if len(body) > maxRequest || cs.objs.store != nil && len(body) > maxEnvelope {
		return &callError{st: status.New(codes.ResourceExhausted, errTooLarge("request message", len(body)).Error()),
			err: &sqsapi.InvalidInputError{Op: "sqsgrpc", Param: "message", Reason: "too large for one SQS message"}}
	}
	err = cs.sess.Send(cs.sctx, &requester.Message{Body: string(body)})
	var ie *sqsapi.InvalidInputError
	switch {
	case err == nil:
		return nil
	case tooLargeSent(err):
		return &callError{st: status.New(codes.ResourceExhausted, "sqsgrpc: "+err.Error()), err: err}
	case errors.As(err, &ie):
		return &callError{st: status.New(codes.InvalidArgument, "sqsgrpc: "+err.Error()), err: err}
	case errors.Is(err, requester.ErrSendClosed):
		return status.Error(codes.Internal, "sqsgrpc: SendMsg after CloseSend")
	}
	return io.EOF // the stream ended: RecvMsg says how
}

// CloseSend half-closes a client stream: the handler's next RecvMsg after
// the last message returns io.EOF. It does not wait.
func (cs *clientStream) CloseSend() error {
	if cs.sess != nil {
		_ = cs.sess.CloseSend() // twice is no error, as with grpc
	}
	return nil
}

// RecvMsg returns the next response, io.EOF after the last one with an OK
// status, or the status error.
func (cs *clientStream) RecvMsg(m any) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for len(cs.msgs) == 0 {
		if cs.end != nil {
			return cs.end
		}
		if err := cs.fill(); err != nil {
			return err
		}
	}
	msg := cs.msgs[0]
	cs.msgs = cs.msgs[1:]
	if len(msg) > cs.ci.maxRecv {
		return recvTooLarge(len(msg), cs.ci.maxRecv)
	}
	if err := cs.ci.codec.unmarshal(msg, m); err != nil {
		return status.Errorf(codes.Internal, "sqsgrpc: decoding a response: %v", err)
	}
	return nil
}

// fill takes the stream's next message.
func (cs *clientStream) fill() error {
	if cs.s == nil {
		return status.Error(codes.Internal, "sqsgrpc: RecvMsg before SendMsg")
	}
	// The stream ends with its context; Next needs no deadline of its own.
	m, err := cs.s.Next(context.Background())
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = badReply(errors.New("the stream ended without a status"))
		} else {
			err = transportError(err)
		}
		cs.finish(nil, err)
		return nil
	}
	f, err := decodeFrames(aws.ToString(m.Body))
	if err != nil {
		cs.s.Close()
		cs.finish(nil, badReply(err))
		return nil
	}
	if err := read(cs.sctx, cs.cc.opts.PayloadStore, slog.Default(), f, true); err != nil {
		cs.s.Close()
		cs.finish(nil, storeError(err))
		return nil
	}
	if f.header != nil && !cs.headerOK {
		cs.header, cs.headerOK = f.header, true
	}
	cs.msgs = append(cs.msgs, f.msgs...)
	if f.status != nil {
		cs.trailer = f.trailer
		end := io.EOF
		if f.status.Code() != codes.OK {
			end = f.status.Err()
		}
		// The status is the stream's last message: Next now returns io.EOF
		// at once, which releases the stream.
		if _, err := cs.s.Next(context.Background()); !errors.Is(err, io.EOF) {
			cs.s.Close()
		}
		cs.finish(f.header, end)
	}
	return nil
}

// finish ends the stream with end.
func (cs *clientStream) finish(header metadata.MD, end error) {
	if !cs.headerOK {
		cs.header, cs.headerOK = header, true
	}
	if cs.end == nil {
		cs.end = end
	}
	if cs.s != nil && !errors.Is(end, io.EOF) {
		cs.s.Close()
	}
	cs.objs.drop(cs.sctx) // the handler returned, or will not read them
	cs.cancel()
	if errors.Is(end, io.EOF) || status.Code(end) != codes.OK {
		for _, p := range cs.ci.headers {
			*p = cs.header
		}
		for _, p := range cs.ci.trailers {
			*p = cs.trailer
		}
	}
}

// Header waits for the response header, reading ahead when needed.
func (cs *clientStream) Header() (metadata.MD, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for !cs.headerOK && cs.end == nil {
		if err := cs.fill(); err != nil {
			return nil, err
		}
	}
	if !cs.headerOK && cs.end != nil && !errors.Is(cs.end, io.EOF) {
		return nil, cs.end
	}
	return cs.header, nil
}

// Trailer returns the trailer, once RecvMsg returned an error or io.EOF.
func (cs *clientStream) Trailer() metadata.MD {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.trailer
}
