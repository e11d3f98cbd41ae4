package sqstest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
	"github.com/tempqueues/tempqueues/sqstest/internal/journal"
	"github.com/tempqueues/tempqueues/sqstest/internal/protocol"
)

// Options configure a Server. Zero values mean the documented defaults.
type Options struct {
	// Region appears in queue ARNs and is the region of Client. Default
	// "us-east-1".
	Region string
	// AccountID appears in queue URLs and ARNs. Default "000000000000".
	AccountID string
	// Clock, when set, is the server's time: a test moves it to expire
	// visibility timeouts, end delays, drop messages past retention and
	// end long polls without sleeping. Nil means real time.
	Clock *Clock
	// Logger receives a debug record per request and the errors returned;
	// nil logs nothing.
	Logger *slog.Logger
	// DataDir, when set, makes the server keep its queues and messages in
	// a journal in this directory (created if missing): a new server on
	// the same directory starts with the state the last one acknowledged,
	// even after a crash. Every change is on disk (fsync) before its
	// request is answered. Empty keeps everything in memory.
	DataDir string
	// Quotas are the account's rate limits the server enforces, as SQS
	// does; none by default. []Quota{{}} enforces SQS's tagging quota:
	// see Quota.
	Quotas []Quota
}

// maxRequestBytes bounds a request body: a full SendMessageBatch of ten
// 1 MiB messages is rejected by SQS anyway, base64 and JSON overhead
// included this is well above anything valid.
const maxRequestBytes = 16 << 20

// Server is an in-process SQS server speaking the AWS JSON 1.0 protocol.
// It is an http.Handler; NewServer and Start also serve it on a loopback
// port. All methods are safe for concurrent use.
type Server struct {
	opts   Options
	clock  timeSource
	log    *slog.Logger
	faults faults
	quotas *quotas // nil unless Options.Quotas

	ln        net.Listener
	http      *http.Server
	url       string
	served    chan struct{} // closed when the accept loop has ended
	done      chan struct{} // closed by Close: parked receives return
	stopped   chan struct{} // closed when Close's work has finished
	closeOnce sync.Once

	runMu   sync.Mutex
	runCond *sync.Cond // signalled by runMu when running drops to zero
	running int        // handlers running; none start once closing is set
	closing bool

	journal *journal.Journal // nil unless Options.DataDir is set

	rngMu sync.Mutex
	rng   *rand.Rand // draws the waits of jittered latency faults

	mu     sync.Mutex // guards everything below, and every queue
	queues map[string]*queue
	parked int // receives waiting in a long poll
}

// NewServer starts a Server listening on a free port of 127.0.0.1. It
// panics if it cannot listen or load Options.DataDir, like
// httptest.NewServer. Close stops it.
func NewServer(optFns ...func(*Options)) *Server {
	s, err := listen(optFns)
	if err != nil {
		panic(err.Error())
	}
	return s
}

// TB is the part of testing.TB that Start uses: *testing.T, *testing.B and
// *testing.F satisfy it. Taking it instead of testing.TB keeps package
// testing out of programs that import sqstest without calling Start.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// closeTimeout bounds the Close that Start makes: handlers end as
// soon as the server closes, so one that takes longer is stuck.
const closeTimeout = 10 * time.Second

// Start starts a Server for a test and closes it when the test ends. It
// fails the test if the server cannot listen, or if its Close abandons a
// request that did not end within 10 s.
func Start(tb TB, optFns ...func(*Options)) *Server {
	tb.Helper()
	s, err := listen(optFns)
	if err != nil {
		tb.Fatalf("%v", err)
		return nil // for a TB whose Fatalf returns
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			tb.Fatalf("sqstest: closing the server: %v", err)
		}
	})
	return s
}

// listenAddr is where NewServer and Start listen: a free loopback port.
const listenAddr = "127.0.0.1:0"

func listen(optFns []func(*Options)) (*Server, error) {
	s := newServer(optFns)
	if err := s.load(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		if s.journal != nil {
			_ = s.journal.Close()
		}
		return nil, fmt.Errorf("sqstest: listening on %s: %w", listenAddr, err)
	}
	s.serve(ln)
	return s, nil
}

// NewHandler returns a Server that does not listen: serve it with any
// http.Server or httptest.Server, alone or beside handlers of your own, as
// tempq emulator serves its web console on the emulator's port. Queue URLs
// then use the Host of each request. Close ends its parked long polls; the
// program closes its own listener. It fails if Options.DataDir is set and
// its journal cannot be loaded (or another server holds it).
func NewHandler(optFns ...func(*Options)) (*Server, error) {
	s := newServer(optFns)
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load restores the state kept in Options.DataDir, if set.
func (s *Server) load() error {
	if s.opts.DataDir == "" {
		return nil
	}
	return s.openJournal(s.opts.DataDir)
}

func newServer(optFns []func(*Options)) *Server {
	var opts Options
	for _, fn := range optFns {
		fn(&opts)
	}
	opts.Region = cmp.Or(opts.Region, "us-east-1")
	opts.AccountID = cmp.Or(opts.AccountID, "000000000000")
	s := &Server{
		opts:    opts,
		clock:   realTime{},
		log:     opts.Logger,
		served:  make(chan struct{}),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		queues:  make(map[string]*queue),
		// Seeded from the runtime's random source, so that two servers
		// draw different waits; a test seeds its own (export_test.go).
		rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	s.runCond = sync.NewCond(&s.runMu)
	if opts.Clock != nil {
		s.clock = opts.Clock
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.quotas = newQuotas(opts.Quotas)
	return s
}

func (s *Server) serve(ln net.Listener) {
	s.ln = ln
	s.url = "http://" + ln.Addr().String()
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.http.Serve(ln)
	}()
}

// URL returns the server's base URL, e.g. "http://127.0.0.1:43127": the
// SDK's BaseEndpoint. It is empty for a server made by NewHandler.
func (s *Server) URL() string { return s.url }

// Client returns a new SDK client for the server: region from Options,
// static dummy credentials, BaseEndpoint URL(). It calls the server in
// process, without a socket (several times faster; the SDK still encodes,
// signs and decodes everything); to go over TCP instead, set o.HTTPClient
// in optFns or build a client for URL() yourself. optFns adjust it, e.g.
// to set RetryMaxAttempts or add API options.
func (s *Server) Client(optFns ...func(*sqs.Options)) *sqs.Client {
	o := sqs.Options{
		Region:       s.opts.Region,
		BaseEndpoint: aws.String(s.url),
		Credentials:  credentials.NewStaticCredentialsProvider("sqstest", "sqstest", ""),
		HTTPClient:   &http.Client{Transport: protocol.Transport{Handler: s}},
	}
	for _, fn := range optFns {
		fn(&o)
	}
	return sqs.New(o)
}

// Close stops the server: it stops accepting connections and requests
// (later calls, in process too, fail with a 503), parked long polls return,
// open connections are closed, and Close waits until every handler and the
// accept loop have ended, or until ctx is done. It returns nil when
// everything ended and ctx's error when it gave up waiting; the rest then
// finishes in the background. It is idempotent: a later call waits the same
// way and returns the same kind of result.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.runMu.Lock()
		s.closing = true
		s.runMu.Unlock()
		close(s.done)
		go s.shutdown()
	})
	select {
	case <-s.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sqstest: Close: %w", ctx.Err())
	}
}

// shutdown does Close's work and closes s.stopped when it is done. Handlers
// end promptly once s.done is closed (parked polls and injected latency
// watch it), so this goroutine ends soon after Close even when Close's
// caller stopped waiting.
func (s *Server) shutdown() {
	defer close(s.stopped)
	if s.http != nil {
		_ = s.http.Close()
		<-s.served
	}
	s.runMu.Lock()
	for s.running > 0 {
		s.runCond.Wait()
	}
	s.runMu.Unlock()
	// Parked receives have stopped their own timers; stop the queues' so
	// that no callback runs after Close.
	s.mu.Lock()
	for _, q := range s.queues {
		q.stopTimer()
	}
	s.mu.Unlock()
	if s.journal != nil {
		if err := s.journal.Close(); err != nil {
			s.log.Error("sqstest: closing the journal", "err", err)
		}
	}
}

// enter registers a running handler; it reports false once Close has begun.
func (s *Server) enter() bool {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.closing {
		return false
	}
	s.running++
	return true
}

func (s *Server) exit() {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	s.running--
	if s.running == 0 {
		s.runCond.Broadcast()
	}
}

// Parked returns the number of ReceiveMessage calls waiting in a long poll.
// Tests use it to know that a receive is parked before they send or advance
// the clock.
func (s *Server) Parked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parked
}

// ServeHTTP implements the SQS JSON 1.0 protocol (POST with X-Amz-Target:
// AmazonSQS.<Operation> and a JSON body) and the older query protocol
// (form-encoded Action=<Operation>, XML answers), chosen per request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := protocol.New(w, r)
	if !s.enter() {
		// Only in-process clients and NewHandler servers get here: a
		// closed listener accepts nothing.
		s.writeError(req, errClosed)
		return
	}
	defer s.exit()

	base := s.url
	if base == "" {
		base = "http://" + r.Host
	}
	if e := req.Parse(base, maxRequestBytes); e != nil {
		s.writeError(req, e)
		return
	}
	op := req.Op
	ctx := r.Context()
	if f, ok := s.faults.take(op); ok {
		if f.latency > 0 && !s.sleep(ctx, s.delay(&f)) {
			return
		}
		if e := f.err(); e != nil {
			s.writeError(req, e)
			return
		}
	}
	if e := s.quotas.take(op, s.clock.now()); e != nil {
		s.writeError(req, e)
		return
	}
	out, err := s.dispatch(ctx, base, op, req.Decode)
	if jerr := s.durable(); jerr != nil {
		// The change is in memory but not on disk: the client must not
		// take it as done.
		s.writeError(req, api.NewError(http.StatusInternalServerError, "InternalFailure", "%v", jerr))
		return
	}
	if err != nil {
		var ae *api.Error
		if !errors.As(err, &ae) {
			if ctx.Err() != nil {
				return // the client has gone; nobody reads an answer
			}
			ae = api.NewError(http.StatusInternalServerError, "InternalFailure", "%v", err)
		}
		s.writeError(req, ae)
		return
	}
	if e := req.Reply(out); e != nil {
		s.writeError(req, e)
		return
	}
	if req.Query() {
		s.log.Debug("sqstest request", "op", op, "request_id", req.ID, "protocol", "query")
	} else {
		s.log.Debug("sqstest request", "op", op, "request_id", req.ID)
	}
}

// writeError logs e and answers req with it.
func (s *Server) writeError(req *protocol.Request, e *api.Error) {
	s.log.Debug("sqstest error", "op", req.Op, "code", e.Code, "status", e.Status, "message", e.Msg)
	req.Fail(e)
}

// delay returns how long f makes a call wait, from the server's source.
func (s *Server) delay(f *Fault) time.Duration {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return f.delay(s.rng)
}

// sleep waits d of real time; it reports false if the request or the
// server ended first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}

// decoder fills a request struct from a request of either protocol.
type decoder func(in any) error

// call decodes a request into In and runs fn on it.
func call[In, Out any](ctx context.Context, dec decoder, fn func(context.Context, *In) (*Out, error)) (any, error) {
	in := new(In)
	if err := dec(in); err != nil {
		return nil, err
	}
	return fn(ctx, in)
}

func (s *Server) dispatch(ctx context.Context, base, op string, body decoder) (any, error) {
	switch op {
	case "CreateQueue":
		return call(ctx, body, func(ctx context.Context, in *api.CreateQueueInput) (*api.QueueURLOutput, error) {
			return s.createQueue(base, in)
		})
	case "GetQueueUrl":
		return call(ctx, body, func(ctx context.Context, in *api.GetQueueURLInput) (*api.QueueURLOutput, error) {
			return s.getQueueURL(base, in)
		})
	case "ListQueues":
		return call(ctx, body, func(ctx context.Context, in *api.ListQueuesInput) (*api.ListQueuesOutput, error) {
			return s.listQueues(base, in)
		})
	case "DeleteQueue":
		return call(ctx, body, s.deleteQueue)
	case "GetQueueAttributes":
		return call(ctx, body, s.getQueueAttributes)
	case "SetQueueAttributes":
		return call(ctx, body, s.setQueueAttributes)
	case "TagQueue":
		return call(ctx, body, s.tagQueue)
	case "UntagQueue":
		return call(ctx, body, s.untagQueue)
	case "ListQueueTags":
		return call(ctx, body, s.listQueueTags)
	case "PurgeQueue":
		return call(ctx, body, s.purgeQueue)
	case "ListDeadLetterSourceQueues":
		return call(ctx, body, func(ctx context.Context, in *api.ListDLQSourcesInput) (*api.ListDLQSourcesOutput, error) {
			return s.listDeadLetterSourceQueues(base, in)
		})
	case "SendMessage":
		return call(ctx, body, s.sendMessage)
	case "SendMessageBatch":
		return call(ctx, body, s.sendMessageBatch)
	case "ReceiveMessage":
		return call(ctx, body, s.receiveMessage)
	case "DeleteMessage":
		return call(ctx, body, s.deleteMessage)
	case "DeleteMessageBatch":
		return call(ctx, body, s.deleteMessageBatch)
	case "ChangeMessageVisibility":
		return call(ctx, body, s.changeMessageVisibility)
	case "ChangeMessageVisibilityBatch":
		return call(ctx, body, s.changeMessageVisibilityBatch)
	case "StartMessageMoveTask":
		return call(ctx, body, s.startMessageMoveTask)
	case "CancelMessageMoveTask":
		return call(ctx, body, s.cancelMessageMoveTask)
	case "ListMessageMoveTasks":
		return call(ctx, body, s.listMessageMoveTasks)
	case "AddPermission", "RemovePermission":
		return nil, api.SenderError("UnsupportedOperation", "sqstest does not implement %s", op)
	default:
		return nil, api.SenderError("InvalidAction", "the action %s is not valid for this endpoint", op)
	}
}
