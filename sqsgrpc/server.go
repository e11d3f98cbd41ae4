package sqsgrpc

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// ServerOptions configure a Server.
type ServerOptions struct {
	// UnaryInterceptors wrap every unary handler, the first outermost, as
	// grpc.ChainUnaryInterceptor does.
	UnaryInterceptors []grpc.UnaryServerInterceptor
	// StreamInterceptors wrap every streaming handler, the first
	// outermost, as grpc.ChainStreamInterceptor does.
	StreamInterceptors []grpc.StreamServerInterceptor
	// Logger receives the server's operational warnings (malformed and
	// expired requests); nil means slog.Default().
	Logger *slog.Logger
	// Now returns the current time, for the expiry of requests; nil means
	// time.Now. For tests.
	Now func() time.Time
	// PayloadStore, if set, reads the request messages a ClientConn put
	// in its ClientConnOptions.PayloadStore (the same store, or one on the
	// same bucket), and carries a response message too large for one SQS
	// message even compressed, up to 64 MiB, for a client whose ClientConn
	// has a store; the client deletes it once read. nil (the default): a
	// request whose message is in a store fails, so that its queue's
	// redrive policy dead-letters it (errors match
	// sqsapi.ErrNoPayloadStore), and such a response fails with
	// codes.ResourceExhausted.
	PayloadStore sqsapi.PayloadStore
	// MaxRecvMsgSize is the largest request message a handler receives,
	// as grpc.MaxRecvMsgSize sets it for a *grpc.Server: a larger one
	// fails the handler's RecvMsg (the unary call) with
	// codes.ResourceExhausted. Zero: grpc's default, 4 MiB.
	MaxRecvMsgSize int
	// MaxSendMsgSize is the largest response message a handler sends, as
	// grpc.MaxSendMsgSize sets it: a larger one fails its SendMsg with
	// codes.ResourceExhausted. Zero: grpc's default, math.MaxInt32.
	MaxSendMsgSize int
}

// Server runs gRPC services registered on it (it is a
// grpc.ServiceRegistrar, so generated RegisterXxxServer functions take it)
// as a responder.Handler for responder.Serve. Register services before
// serving.
type Server struct {
	opts ServerOptions

	mu       sync.RWMutex
	services map[string]*service // by service name
}

type service struct {
	impl    any
	methods map[string]*grpc.MethodDesc
	streams map[string]*grpc.StreamDesc
	meta    any
}

var _ grpc.ServiceRegistrar = (*Server)(nil)

// NewServer returns a Server with no service.
func NewServer(optFns ...func(*ServerOptions)) *Server {
	s := &Server{services: make(map[string]*service)}
	for _, fn := range optFns {
		fn(&s.opts)
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.Default()
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	if s.opts.MaxRecvMsgSize == 0 {
		s.opts.MaxRecvMsgSize = defaultMaxRecv
	}
	if s.opts.MaxSendMsgSize == 0 {
		s.opts.MaxSendMsgSize = defaultMaxSend
	}
	return s
}

// RegisterService registers a service and its implementation, as
// (*grpc.Server).RegisterService does; like it, it panics when impl does
// not implement desc's HandlerType or the service is registered twice.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	if impl != nil && desc.HandlerType != nil {
		ht := reflect.TypeOf(desc.HandlerType).Elem()
		if st := reflect.TypeOf(impl); !st.Implements(ht) {
			panic(fmt.Sprintf("sqsgrpc: RegisterService found the handler of type %v that does not satisfy %v", st, ht))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.services[desc.ServiceName]; dup {
		panic(fmt.Sprintf("sqsgrpc: RegisterService found duplicate service registration for %q", desc.ServiceName))
	}
	svc := &service{impl: impl, methods: make(map[string]*grpc.MethodDesc), streams: make(map[string]*grpc.StreamDesc), meta: desc.Metadata}
	for i := range desc.Methods {
		svc.methods[desc.Methods[i].MethodName] = &desc.Methods[i]
	}
	for i := range desc.Streams {
		svc.streams[desc.Streams[i].StreamName] = &desc.Streams[i]
	}
	s.services[desc.ServiceName] = svc
}

// GetServiceInfo returns the registered services, as
// (*grpc.Server).GetServiceInfo does.
func (s *Server) GetServiceInfo() map[string]grpc.ServiceInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]grpc.ServiceInfo, len(s.services))
	for name, svc := range s.services {
		var ms []grpc.MethodInfo
		for m := range svc.methods {
			ms = append(ms, grpc.MethodInfo{Name: m})
		}
		for m, d := range svc.streams {
			ms = append(ms, grpc.MethodInfo{Name: m, IsClientStream: d.ClientStreams, IsServerStream: d.ServerStreams})
		}
		out[name] = grpc.ServiceInfo{Methods: ms, Metadata: svc.meta}
	}
	return out
}

// Handler returns the responder.Handler that serves the registered
// services: run it with responder.Serve on the request queue the clients'
// ClientConn sends to.
//
// The caller's deadline bounds the handler's context: the responder
// deletes a request that expired before it was received, unhandled, and
// runs the others under the caller's deadline less the reply's travel
// back (docs/wire.md, "Deadlines").
// A request whose message carries no deadline attribute is bounded by the
// one in its envelope instead, and deleted unhandled (logged at Info) when
// that has passed.
// The incoming metadata (metadata.FromIncomingContext), grpc.SetHeader,
// grpc.SendHeader and grpc.SetTrailer work as under a *grpc.Server. A
// streaming handler's messages go out as they are sent, each in a message
// of the call's session; the status and the trailer end it. RecvMsg of a
// client-streaming or bidirectional handler returns the client's messages
// as they arrive, io.EOF after its CloseSend, and codes.Canceled when the
// client went away (its context is cancelled too). A
// response message too large for one SQS message as it is sent (gzipped
// when the client reads compressed replies, Request.CompressedReplies)
// goes through ServerOptions.PayloadStore when both sides have a store,
// and otherwise fails its SendMsg (or the unary call) with
// codes.ResourceExhausted, nothing sent. An unknown
// method gets codes.Unimplemented, a malformed request codes.Internal. A
// failed send of a streamed message, or a panic, fails the request: its
// session is aborted (the client gets codes.Unavailable, wrapping
// requester.ErrSessionAborted), or, for a unary call, it is received
// again or reaches the dead-letter queue. A call whose client went away
// (cancelled, or past its deadline) is finished as a drop.
func (s *Server) Handler() responder.Handler { return responder.HandlerFunc(s.handle) }

func (s *Server) handle(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
	r, err := decodeRequest(req.Body())
	if err != nil {
		s.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "sqsgrpc: malformed request", slog.String("request_id", req.ID), slog.Any("error", err))
		return statusReply(status.New(codes.Internal, "sqsgrpc: "+err.Error())), nil
	}
	if _, bounded := ctx.Deadline(); !bounded && !r.deadline.IsZero() {
		// The responder found no TempQueues.Deadline to bound the handler
		// by (a sender without it, or a request with no room for it): the
		// envelope's deadline does.
		if now := s.opts.Now(); !now.Before(r.deadline) {
			s.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "sqsgrpc: request expired before it was handled; deleted",
				slog.String("request_id", req.ID), slog.String("method", r.method), slog.Duration("late_by", now.Sub(r.deadline)))
			return nil, nil
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, r.deadline)
		defer cancel()
	}
	if o := r.object; o.key != "" {
		// The client put the message in its store. Failing the request
		// (no store here, the object gone) lets its queue's redrive
		// policy dead-letter it rather than answer without the message.
		if s.opts.PayloadStore == nil {
			return nil, fmt.Errorf("sqsgrpc: the request message is in s3://%s/%s: %w", o.bucket, o.key, sqsapi.ErrNoPayloadStore)
		}
		if r.msg, err = s.opts.PayloadStore.Get(ctx, o.bucket, o.key); err != nil {
			return nil, fmt.Errorf("sqsgrpc: reading the request message from ServerOptions.PayloadStore: %w", err)
		}
	}
	c, err := codecFor(r.subtype)
	if err != nil {
		return statusReply(status.New(codes.Internal, "sqsgrpc: "+err.Error())), nil
	}
	_, streaming := req.Attribute(sqsapi.StreamAttribute)
	ss := &serverStream{req: req, method: r.method, codec: c, msg: r.msg, streamed: r.streamed, stream: streaming && req.ResponseRequested(),
		reads: s.opts.PayloadStore, log: s.opts.Logger, deadline: r.deadline, maxRecv: s.opts.MaxRecvMsgSize, maxSend: s.opts.MaxSendMsgSize}
	if r.store {
		ss.store = s.opts.PayloadStore
	}
	ctx = metadata.NewIncomingContext(ctx, r.md)
	ctx = grpc.NewContextWithServerTransportStream(ctx, ss)
	ss.ctx = ctx

	svcName, methodName, ok := splitMethod(r.method)
	s.mu.RLock()
	svc := s.services[svcName]
	s.mu.RUnlock()
	if !ok || svc == nil {
		return ss.end(status.Newf(codes.Unimplemented, "unknown service %s", svcName))
	}
	if md, ok := svc.methods[methodName]; ok {
		resp, err := md.Handler(svc.impl, ctx, func(v any) error { return ss.RecvMsg(v) }, s.unaryInterceptor())
		if err != nil {
			return ss.end(errStatus(err))
		}
		if err := ss.SendMsg(resp); err != nil {
			return ss.end(errStatus(err))
		}
		return ss.end(status.New(codes.OK, ""))
	}
	sd, ok := svc.streams[methodName]
	if !ok {
		return ss.end(status.Newf(codes.Unimplemented, "unknown method %s for service %s", methodName, svcName))
	}
	info := &grpc.StreamServerInfo{FullMethod: r.method, IsClientStream: sd.ClientStreams, IsServerStream: sd.ServerStreams}
	err = s.streamHandler(sd.Handler)(svc.impl, handlerStream{ss}, info)
	if ss.sendErr != nil {
		return nil, ss.sendErr // fail the request: it is received again
	}
	return ss.end(errStatus(err))
}

// errStatus is the status of a handler's error.
func errStatus(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return status.FromContextError(err)
	}
	return status.New(codes.Unknown, err.Error())
}

func splitMethod(m string) (svc, method string, ok bool) {
	m = strings.TrimPrefix(m, "/")
	i := strings.LastIndexByte(m, '/')
	if i <= 0 || i == len(m)-1 {
		return "", "", false
	}
	return m[:i], m[i+1:], true
}

// unaryInterceptor chains the unary interceptors into one, or nil.
func (s *Server) unaryInterceptor() grpc.UnaryServerInterceptor {
	ics := s.opts.UnaryInterceptors
	if len(ics) == 0 {
		return nil
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		next := handler
		for i := len(ics) - 1; i >= 0; i-- {
			ic, inner := ics[i], next
			next = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, inner) }
		}
		return next(ctx, req)
	}
}

// streamHandler wraps h in the stream interceptors.
func (s *Server) streamHandler(h grpc.StreamHandler) func(any, grpc.ServerStream, *grpc.StreamServerInfo) error {
	return func(impl any, ss grpc.ServerStream, info *grpc.StreamServerInfo) error {
		next := func(srv any, ss grpc.ServerStream) error { return h(srv, ss) }
		for i := len(s.opts.StreamInterceptors) - 1; i >= 0; i-- {
			ic, inner := s.opts.StreamInterceptors[i], next
			next = func(srv any, ss grpc.ServerStream) error { return ic(srv, ss, info, inner) }
		}
		return next(impl, ss)
	}
}

func statusReply(st *status.Status) *responder.Reply {
	b, err := appendEnd(nil, nil, st)
	if err != nil {
		b, _ = appendEnd(nil, nil, status.New(codes.Internal, "sqsgrpc: encoding the status"))
	}
	return &responder.Reply{Body: string(b)}
}

// serverStream is an RPC's server side: the grpc.ServerStream of a
// streaming handler, and the grpc.ServerTransportStream behind
// grpc.SetHeader and friends. It runs on the handler's goroutine (a
// streaming handler that sends from others must serialise its sends, as
// under grpc).
type serverStream struct {
	ctx      context.Context
	req      *responder.Request
	method   string
	codec    codec
	msg      []byte // the request message, until RecvMsg takes it
	read     bool
	streamed bool                // the request's messages follow in its session (req.Recv)
	stream   bool                // the caller takes a stream
	reads    sqsapi.PayloadStore // the server's, for request messages in a store
	store    sqsapi.PayloadStore // for response messages too large for one SQS message, when the client reads them; nil: none
	log      *slog.Logger
	deadline time.Time // the client's, for the keys of objects in store
	maxRecv  int       // ServerOptions.MaxRecvMsgSize
	maxSend  int       // ServerOptions.MaxSendMsgSize

	recvMu sync.Mutex // RecvMsg's: it may wait while the handler sends

	mu         sync.Mutex
	header     metadata.MD
	headerSent bool
	trailer    metadata.MD
	pending    []byte // frames for the final reply (a one-reply caller)
	sent       bool   // a message of the stream went out
	sendErr    error
}

// handlerStream is the grpc.ServerStream a streaming handler gets, whose
// SetTrailer returns nothing.
type handlerStream struct{ *serverStream }

func (hs handlerStream) SetTrailer(md metadata.MD) { _ = hs.serverStream.SetTrailer(md) }

var (
	_ grpc.ServerStream          = handlerStream{}
	_ grpc.ServerTransportStream = (*serverStream)(nil)
)

func (ss *serverStream) Method() string           { return ss.method }
func (ss *serverStream) Context() context.Context { return ss.ctx }

func (ss *serverStream) SetHeader(md metadata.MD) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.headerSent {
		return status.Error(codes.Internal, "sqsgrpc: SetHeader after the header was sent")
	}
	ss.header = metadata.Join(ss.header, md)
	return nil
}

func (ss *serverStream) SendHeader(md metadata.MD) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.headerSent {
		return status.Error(codes.Internal, "sqsgrpc: the header was sent already")
	}
	ss.header = metadata.Join(ss.header, md)
	b, err := ss.headerFramesLocked(nil)
	if err != nil {
		return err
	}
	return ss.emitLocked(b)
}

func (ss *serverStream) SetTrailer(md metadata.MD) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.trailer = metadata.Join(ss.trailer, md)
	return nil
}

// RecvMsg returns the request message once, then io.EOF; or, for a call
// whose client streams, the next message of its session, io.EOF after
// the client half-closed. A client that went away makes it fail with
// codes.Canceled (the handler's context is cancelled too).
func (ss *serverStream) RecvMsg(m any) error {
	if ss.streamed {
		return ss.recvStreamed(m)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.read {
		return io.EOF
	}
	ss.read = true
	if len(ss.msg) > ss.maxRecv {
		return recvTooLarge(len(ss.msg), ss.maxRecv)
	}
	if err := ss.codec.unmarshal(ss.msg, m); err != nil {
		return status.Errorf(codes.Internal, "sqsgrpc: decoding the request: %v", err)
	}
	ss.msg = nil
	return nil
}

func (ss *serverStream) recvStreamed(m any) error {
	ss.recvMu.Lock()
	defer ss.recvMu.Unlock()
	msg, err := ss.req.Recv(ss.ctx)
	switch {
	case errors.Is(err, io.EOF):
		return io.EOF
	case errors.Is(err, responder.ErrCallerGone):
		return status.Error(codes.Canceled, "sqsgrpc: the client cancelled the call")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return status.FromContextError(err).Err()
	case err != nil:
		return status.Errorf(codes.Internal, "sqsgrpc: receiving a request message: %v", err)
	}
	f, err := decodeFrames(aws.ToString(msg.Body))
	if err != nil || len(f.msgs) != 1 {
		if err == nil {
			err = fmt.Errorf("%d messages in one frame set", len(f.msgs))
		}
		return status.Errorf(codes.Internal, "sqsgrpc: a malformed request message: %v", err)
	}
	// The client deletes what it put once the call ends.
	if err := read(ss.ctx, ss.reads, ss.log, f, false); err != nil {
		return &callError{st: status.Newf(codes.Unavailable, "sqsgrpc: %v", err), err: err}
	}
	if n := len(f.msgs[0]); n > ss.maxRecv {
		return recvTooLarge(n, ss.maxRecv)
	}
	if err := ss.codec.unmarshal(f.msgs[0], m); err != nil {
		return status.Errorf(codes.Internal, "sqsgrpc: decoding a request message: %v", err)
	}
	return nil
}

// SendMsg sends a response: at once as the stream's next message when the
// caller takes a stream, otherwise in the final reply.
func (ss *serverStream) SendMsg(m any) error {
	msg, err := ss.codec.marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "sqsgrpc: encoding a response: %v", err)
	}
	if len(msg) > ss.maxSend {
		return sendTooLarge(len(msg), ss.maxSend)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.sendErr != nil {
		return ss.sendErr
	}
	b, err := ss.headerFramesLocked(nil)
	if err != nil {
		return err
	}
	// What goes in the message this one goes in: the frames held for a
	// one-reply caller, the header's, and the message's, sized before the
	// message is encoded (a large one goes to the store as it is).
	pending := ss.pending
	if ss.stream {
		pending = nil
	}
	n := len(pending) + len(b) + frameLen(msg)
	inline := n <= maxEnvelope || ss.req.CompressedReplies() && fitsCompressed(n, func(w io.Writer) error {
		for _, p := range [][]byte{pending, b, {frameMessage, ' '}} {
			if _, err := w.Write(p); err != nil {
				return err
			}
		}
		enc := base64.NewEncoder(base64.StdEncoding, w)
		if _, err := enc.Write(msg); err != nil {
			return err
		}
		if err := enc.Close(); err != nil {
			return err
		}
		_, err := w.Write([]byte{'\n'})
		return err
	})
	switch {
	case inline:
		b = appendMessageFrame(b, msg)
	case ss.store == nil || len(msg) > maxStored:
		return status.Error(codes.ResourceExhausted, errTooLarge("response", n).Error())
	default:
		o, err := put(ss.ctx, ss.store, msg, ss.deadline)
		if err != nil {
			return status.Errorf(codes.Unavailable, "sqsgrpc: putting a response in ServerOptions.PayloadStore: %v", err)
		}
		b = append(o.appendFrame(b), '\n')
	}
	return ss.emitLocked(b)
}

// fits reports whether b fits in one SQS message as it is sent: as it
// is, or gzipped for a client that reads that (the responder compresses
// when that pays; docs/wire.md, "Compression").
func (ss *serverStream) fits(b []byte) bool {
	return len(b) <= maxEnvelope || ss.req.CompressedReplies() && fitsCompressed(len(b), func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// headerFramesLocked appends the header frames unless they were sent.
func (ss *serverStream) headerFramesLocked(b []byte) ([]byte, error) {
	if ss.headerSent {
		return b, nil
	}
	b, err := appendHeaderFrames(b, ss.header)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sqsgrpc: %v", err)
	}
	ss.headerSent = true
	return b, nil
}

// emitLocked sends frames as the stream's next message, or keeps them for
// the final reply.
func (ss *serverStream) emitLocked(b []byte) error {
	if !ss.stream {
		ss.pending = append(ss.pending, b...)
		return nil
	}
	if err := ss.req.Send(ss.ctx, &responder.Reply{Body: string(b)}); err != nil {
		code := codes.Unavailable
		if errors.Is(err, responder.ErrCallerGone) {
			code = codes.Canceled
		}
		// The responder's error stays in the chain: a reply queue gone or
		// a caller that went away ends the request as a drop.
		ss.sendErr = &callError{st: status.Newf(code, "sqsgrpc: sending a response: %v", err), err: err}
		return ss.sendErr
	}
	ss.sent = true
	return nil
}

// end returns the final reply: what is pending, the trailer and st.
func (ss *serverStream) end(st *status.Status) (*responder.Reply, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.sendErr != nil {
		return nil, ss.sendErr
	}
	b := ss.pending
	if st.Code() != codes.OK && !ss.sent {
		b = nil // a failed unary call carries no response, as under grpc
		ss.headerSent = false
	}
	b, err := ss.headerFramesLocked(b)
	if err == nil {
		b, err = appendEnd(b, ss.trailer, st)
	}
	if err != nil {
		return statusReply(status.New(codes.Internal, err.Error())), nil
	}
	if !ss.fits(b) {
		return statusReply(status.New(codes.ResourceExhausted, errTooLarge("response", len(b)).Error())), nil
	}
	return &responder.Reply{Body: string(b)}, nil
}
