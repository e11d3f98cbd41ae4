// Package requester sends requests over SQS and waits for their responses,
// wire-compatible with AWS's Java Temporary Queue Client
// (AmazonSQSRequester): each request carries a ResponseQueueUrl message
// attribute naming a virtual reply queue on this process's host queue, and a
// TempQueues.RequestId attribute that responders use to deduplicate.
//
//	r, err := requester.New(sqsClient)
//	defer r.Close(ctx)
//	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
//	defer cancel()
//	reply, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{
//		QueueUrl: aws.String(requestQueueURL), MessageBody: aws.String("login alice"),
//	})
//	if errors.Is(err, requester.ErrTimeout) { ... }
//
// The host queue (<prefix><uuid>-<n>) is created on the first request,
// tagged and heartbeated for the reaper, and deleted by Close. Reply queues
// are virtual: each pending request is one entry in the host's map from
// reply name to waiting call, so it costs no API call, no queue and no
// goroutine, and the host queue is polled only while requests are pending.
// Replies are handed to their callers by the host's poller and deleted in
// batches off the callers' path. A reply arriving after its caller gave up
// is deleted, counted and logged once.
//
// # Host queues
//
// Options.HostQueueAttributes may set, from the Java client's list,
// DelaySeconds, MaximumMessageSize, MessageRetentionPeriod, Policy,
// ReceiveMessageWaitTimeSeconds, RedrivePolicy, VisibilityTimeout,
// KmsMasterKeyId, KmsDataKeyReusePeriodSeconds and SqsManagedSseEnabled.
// FifoQueue "true" makes the host queue a FIFO queue
// (<prefix><uuid>-<n>.fifo, so Prefix has at most 35 characters), with
// ContentBasedDeduplication, DeduplicationScope and FifoThroughputLimit if
// wanted: each reply queue is then a message group of its own, so replies
// to one request arrive in the order they were sent, and one request's
// replies never hold up another's. FIFO queues cost more per call and
// allow fewer calls per second (docs/limits.md).
//
// # Observing
//
// Options.Observer is told (package observe):
//
//   - Send, for each request before it is checked and sent, on the
//     caller's goroutine: Message is a copy of the outgoing request (Body
//     and MessageAttributes, with what Options.Propagator added), Queue
//     its queue and RequestID its TempQueues.RequestId. The done func
//     it returns, if not nil, is called once when the call ends, with the
//     reply or the error (bad input, a failed send, a timeout matching
//     ErrTimeout, sqsapi.ErrClosed); for a stream, when the stream ends, with its
//     final reply (nil when the handler sent none) or what stopped it. It
//     may run on the host queue's poller and must not block. Metrics, and
//     the end of a request's span (module oteltempq), hang on it.
//   - Dropped, Reason "late-reply", for each reply that came after its
//     caller gave up, or twice, and was deleted unread.
//   - QueueGone, when the host queue was found deleted, and Swept after a
//     sweep this process ran (Detail is its reaper.Report), from the
//     requester's reaper.
//
// Options.Propagator writes into each request before the Send event, with
// room for as many message attributes as SQS's 10 leave beside the
// requester's own (ResponseQueueUrl, TempQueues.RequestId unless the
// caller set it, the routing name of a virtual queue, a stream's
// TempQueues.Stream), and may add an AWSTraceHeader system attribute;
// what it adds is checked with the rest before any call. The context it
// returns is the one the Send event gets: oteltempq starts a request's
// span there.
//
// # Compression
//
// Each request offers compressed replies (TempQueues.Accept: gzip) when it
// has room for the attribute, unless Options.DisableCompression: a
// tempqueues responder then sends a reply of 8 KiB or more that shrinks by
// a tenth gzipped in the Binary attribute TempQueues.Body, which the
// caller gets inflated, and a Java one ignores the offer. A reply that
// does not decompress, or would inflate past 64 MiB, fails its call with
// an error matching ErrBadResponse. With Options.CompressRequests,
// requests and a Session's messages travel compressed too, when that
// pays; only responders that know compression read them (Serve and
// Process of this version or later), not a Java responder, an older one,
// or a loop of one's own over responder.SendResponseMessage.
// PublishGather's requests, which cross a topic, go as they are. SQS's
// 1 MiB applies to what is sent, so a large body that compresses well
// fits (docs/wire.md, "Compression").
//
// # Large replies
//
// A call (SendMessageAndGetResponse, its Async form) offers to join a
// reply in parts (TempQueues.Accept: parts): a responder with no
// PayloadStore then sends a reply too large for one message even
// compressed as parts of up to 1 MiB, which the call joins back
// byte-exact, in whatever order and however often SQS delivers them, up
// to 64 MiB (docs/limits.md). The caller gets one message: the joined
// body, with the last part's attributes. Until every part arrived the
// call holds what came, at most the 64 MiB, and drops it when it ends.
// With a PayloadStore on the responder, the store carries such a reply
// instead (docs/wire.md, "Replies in parts").
package requester

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/callback"
	"github.com/tempqueues/tempqueues/internal/callbound"
	"github.com/tempqueues/tempqueues/internal/core"
	"github.com/tempqueues/tempqueues/internal/deflog"
	"github.com/tempqueues/tempqueues/internal/hostq"
	"github.com/tempqueues/tempqueues/internal/lifecycle"
	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
)

var (
	// ErrTimeout is matched by the error of a request whose context
	// deadline passed before its response arrived. That error also matches
	// context.DeadlineExceeded and names the request, its queue and how long
	// it waited. When the deadline passed while the request's send was
	// still being retried (throttled, or after a server error), it wraps the
	// send's last failure, which errors.As then finds (a smithy.APIError
	// with the throttling code). The usual causes, most likely first: no
	// responder serves the queue; the responder refused to reply to this
	// requester's queue (its Options.AllowReplyTo, logged at Warn on the
	// responder's side); the handler ran past the deadline; the request
	// went to a dead-letter queue (docs/troubleshooting.md).
	ErrTimeout = errors.New("requester: timed out waiting for the response")
	// ErrBadResponse is matched by the error of a call whose response
	// cannot be read: its body travels compressed (docs/wire.md,
	// "Compression") and does not decompress, or would inflate past 64
	// MiB; its parts do not join (docs/wire.md, "Replies in parts"); or
	// the responder's reply was over the 64 MiB a reply may have in parts
	// (docs/limits.md), which the responder says at once. A responder
	// sends compressed replies and parts only to requests that advertise
	// them, and never a damaged one: it was damaged on its way, or came
	// from something else.
	ErrBadResponse = errors.New("requester: bad response")
)

// badResponse is the error of a response to requestID that Decode
// refused.
func badResponse(requestID string, err error) error {
	return fmt.Errorf("%w to request %s: %w", ErrBadResponse, requestID, err)
}

// timeoutError is the error of a request that timed out (ErrTimeout).
type timeoutError struct {
	requestID string        // the request's TempQueues.RequestId
	queueURL  string        // the queue the request was sent to
	waited    time.Duration // from the send to the deadline
	sendErr   error         // the send's last failure when its retries were cut short
}

func (e *timeoutError) Error() string {
	if e.sendErr != nil {
		return fmt.Sprintf("requester: request %s to %s: deadline passed after %v while its send was retried: %v", e.requestID, e.queueURL, e.waited.Round(time.Millisecond), e.sendErr)
	}
	return fmt.Sprintf("requester: no response to request %s on %s within %v", e.requestID, e.queueURL, e.waited.Round(time.Millisecond))
}

// Unwrap returns the send's last failure when the deadline cut its retries
// short, or nil.
func (e *timeoutError) Unwrap() error { return e.sendErr }

// Is makes errors.Is match ErrTimeout and context.DeadlineExceeded.
func (e *timeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}

// Options configure a Requester. Zero values mean the documented defaults.
type Options struct {
	// Prefix starts host queue names; default ("")
	// sqsapi.DefaultQueuePrefix. New rejects a prefix that would make host
	// queue names exceed 80 characters. Responders reply by default only
	// to host queues with the default prefix: with another, give it to
	// them in responder.Options.AllowReplyTo.
	Prefix string
	// IdleQueueRetention is how long the host queue may miss heartbeats
	// before a reaper deletes it: whole seconds, at least 1 s; default (0)
	// 300 s.
	IdleQueueRetention time.Duration
	// HostQueueAttributes are the attributes of the host queue that receives
	// replies (VisibilityTimeout, KmsMasterKeyId, a Policy letting another
	// account reply...), from the Java client's list (the package doc's
	// "Host queues"). FifoQueue "true" makes it a FIFO queue, each reply
	// queue a message group of its own (docs/fifo.md).
	HostQueueAttributes map[string]string
	// HostQueueTags are the user's tags (cost allocation, ownership) for
	// every host queue, set in its CreateQueue together with the reaper's
	// two tags; heartbeats leave them in place. New rejects tags SQS would
	// refuse (keys of 1 to 128 and values of at most 256 characters of
	// letters, digits, spaces and _ . : / = + - @, no "aws:" prefix), more
	// than 48 of them (SQS's 50 less the reaper's), and the reaper's keys
	// (__IdleQueueRetentionPeriodSeconds and
	// __AmazonSQSIdleQueueDeletingClient.LastHeartbeatTimestamp).
	HostQueueTags map[string]string
	// Timeout bounds requests whose context has no deadline; default 30s. A
	// negative value waits until the context is cancelled.
	Timeout time.Duration
	// PollWaitTime is the long-poll wait of the host queue's receives while
	// requests are pending; default 20s (the SQS maximum).
	PollWaitTime time.Duration
	// DisableSweeping stops this process from sweeping idle host queues of
	// dead processes; it still heartbeats its own.
	DisableSweeping bool
	// SweepPeriod is how often the fleet sweeps (reaper.Options.Period);
	// every process of a fleet should use the same. Default (0) 5 minutes.
	SweepPeriod time.Duration
	// CompressRequests gzips requests, and a Session's messages, when that
	// pays. Off by default: only responders that know compression read
	// them (the package doc's "Compression").
	CompressRequests bool
	// PayloadStore, if set, carries the bodies over 448 KiB even
	// compressed (where S3 costs less than SQS, docs/cost.md), up to
	// 64 MiB, in the format of AWS's SQS extended
	// clients (docs/wire.md, "Payloads in S3"): a request's body goes to
	// the store and its message carries a pointer, which the responder
	// reads (and deletes once it has replied); a reply that points to the
	// store is read from it, and its object deleted. So do a stream's
	// and a session's requests and messages, both ways (Stream.Next reads
	// a pointer when it takes its message), and a PublishGather's
	// replies; not a PublishGather's request, which several responders
	// read. Without it, such a
	// request fails before any call, and a reply that points to a store
	// with an error matching ErrBadResponse and sqsapi.ErrNoPayloadStore;
	// a responder without a store sends a call's large reply in parts,
	// which the call joins (the package doc's "Large replies"). The
	// nested module s3payload provides one on Amazon S3.
	PayloadStore sqsapi.PayloadStore
	// DisableCompression leaves off the offer of compressed replies
	// (TempQueues.Accept): responders then reply as they are. Responses
	// are read whatever it says.
	DisableCompression bool
	// PreferFewerCalls trades latency for calls at moderate loads: a
	// request waits for the send in flight to its queue instead of going
	// in a call of its own, and the host keeps no spare poller parked for
	// the next burst of replies. By default the requester measures the
	// call latency and the pace of its callers and takes whichever is
	// faster, and still makes fewer calls than a hand-written reply
	// queue; docs/cost.md says what this changes.
	PreferFewerCalls bool
	// Logger receives operational warnings and debug records; nil means
	// slog.Default(), as docs/architecture.md#conventions says.
	Logger *slog.Logger
	// Observer, if set, is told of each request before it is checked and
	// sent (a Send event, on the caller's goroutine; its done func gets the
	// reply or the failure), of each late reply (Dropped), and of what the
	// requester's reaper finds (QueueGone, Swept). Events and what each
	// carries: the package doc's "Observing". nil: no events.
	Observer observe.Observer
	// Propagator, if set, writes into each request before it is checked
	// and sent, and before the Observer's Send event (a trace context:
	// message attributes within the room left, an AWSTraceHeader system
	// attribute). nil: requests go as the caller made them.
	Propagator observe.Propagator
}

// replyVisibility is the visibility the host poller gives replies it
// receives: replies are taken within milliseconds of their receive, so a
// short one costs nothing and bounds the delay when a receive's response
// is lost (its replies reappear in 5s, not after the host queue's 30s).
const replyVisibility = 5 * time.Second

// sendsInFlight bounds the request sends in flight to one queue. Sends
// wait for a call in flight only when enough company would join them
// (internal/batch's policy), so this is room for the sparse loads where
// each send goes at once, not a batching knob.
const sendsInFlight = 16

// Requester sends requests and waits for responses. It is safe for
// concurrent use.
type Requester struct {
	core     *core.Core // the host queue's owner and reaper, and the sender
	opts     Options
	log      *slog.Logger
	counters *hostq.Counters

	host atomic.Pointer[hostq.Host] // the current host, once opened

	mu       sync.Mutex
	pending  map[*Call]struct{}
	sessions map[*Session]struct{} // open sessions, for Close to end
	closed   bool

	closer lifecycle.Once
	// payloadWork counts the goroutines that read replies from
	// Options.PayloadStore or delete their objects; Close waits for them.
	payloadWork sync.WaitGroup

	timedOut, failed atomic.Int64
	replied          atomic.Int64 // replies handed to callers (export_test.go)
	late             atomic.Int64 // replies to streams that stopped early
}

// isClosed reports whether Close was called.
func (r *Requester) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// New returns a Requester over client. It validates the options and starts
// the reaper (heartbeats and, unless disabled, sweeps); the host queue is
// created on the first request. An *sqs.Client is used through a copy
// with sqsclient.BufferRequestBodies installed.
func New(client sqsapi.Client, optFns ...func(*Options)) (*Requester, error) {
	const op = "requester.New"
	if err := wire.CheckClient(op, "client", client); err != nil {
		return nil, err
	}
	var opts Options
	for _, fn := range optFns {
		fn(&opts)
	}
	if opts.Prefix == "" {
		opts.Prefix = sqsapi.DefaultQueuePrefix
	}
	if opts.IdleQueueRetention == 0 {
		opts.IdleQueueRetention = wire.DefaultIdleQueueRetention
	}
	opts.Logger = deflog.Or(opts.Logger)
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	opts.HostQueueAttributes = maps.Clone(opts.HostQueueAttributes) // the caller may change theirs
	if err := hostq.CheckAttributes(op, opts.HostQueueAttributes); err != nil {
		return nil, err
	}
	if err := hostq.CheckFIFOPrefix(op, opts.Prefix, opts.HostQueueAttributes); err != nil {
		return nil, err
	}
	r := &Requester{
		opts:     opts,
		log:      opts.Logger,
		counters: new(hostq.Counters),
		pending:  make(map[*Call]struct{}),
	}
	c, err := core.New(op, client, core.Options{
		Logger:           opts.Logger,
		Prefix:           opts.Prefix,
		Retention:        opts.IdleQueueRetention,
		Tags:             opts.HostQueueTags,
		DisableSweeping:  opts.DisableSweeping,
		Reaper:           reaperConfig(opts),
		MaxSends:         sendsInFlight,
		PreferFewerCalls: opts.PreferFewerCalls,
		Host: &hostq.Options{
			Logger:                   opts.Logger,
			PollWaitTime:             opts.PollWaitTime,
			Linger:                   true, // the host queue is this process's alone
			ReceiveVisibilityTimeout: replyVisibility,
			NoSystemAttributes:       true,
			TraceHeader:              true,
			Counters:                 r.counters,
			Answering:                r.answering,
			FewerPollers:             opts.PreferFewerCalls,
			Observer:                 asLateReplies(opts.Observer),
			// A reply no pending call takes (it came after its caller
			// gave up, or twice) is deleted, counted and logged once: the
			// host's default for orphans; its payload's object too.
			Orphan: r.orphan,
		},
	})
	if err != nil {
		return nil, err
	}
	r.core = c
	return r, nil
}

// Call is a request in flight. Its methods are safe for concurrent use.
type Call struct {
	r         *Requester
	host      *hostq.Host
	replyName string
	requestID string
	queueURL  string // where the request went
	sentAt    time.Time
	object    *payload.Pointer // the request's body in Options.PayloadStore, if it went there

	done chan struct{}
	once sync.Once
	msg  *types.Message
	err  error

	cancelCtx context.CancelFunc          // releases the default-timeout context
	waitCtx   context.Context             // bounds the wait for the response, once sent
	after     func(*types.Message, error) // Options.Observer's done, or nil

	mu        sync.Mutex
	finished  bool
	stopWatch func() bool     // stops the context watch, set after the send
	join      *payload.Joiner // a reply in parts being joined, until the call finishes
	last      *types.Message  // a reply in parts' last part, once it arrived
	run       string          // the run whose parts join names
	gone      map[string]bool // runs whose parts were dropped for a later run's
}

// withdraw cancels the reply's expectation; false means the reply (or an
// error) is being delivered.
func (c *Call) withdraw() bool { return c.host.Unexpect(c.replyName) }

// RequestID returns the id carried in the request's TempQueues.RequestId
// attribute and echoed in the response's TempQueues.CorrelationId.
func (c *Call) RequestID() string { return c.requestID }

// Done is closed when the call has its response or error.
func (c *Call) Done() <-chan struct{} { return c.done }

// Wait waits for the response or the call's error. If ctx ends first, Wait
// returns ctx's error and the call goes on until its own context ends.
func (c *Call) Wait(ctx context.Context) (*types.Message, error) {
	select {
	case <-c.done:
		return c.msg, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Cancel abandons the call: a response arriving later is an orphan. It
// reports whether the call was still pending.
func (c *Call) Cancel() bool {
	if c.withdraw() {
		c.finish(nil, context.Canceled)
		return true
	}
	return false
}

// finish completes the call once and releases what it holds.
func (c *Call) finish(msg *types.Message, err error) {
	c.once.Do(func() {
		c.msg, c.err = msg, err
		c.mu.Lock()
		c.finished = true
		stop := c.stopWatch
		c.join, c.last = nil, nil // what a reply in parts held is freed
		c.mu.Unlock()
		if stop != nil {
			stop()
		}
		c.r.mu.Lock()
		delete(c.r.pending, c)
		c.r.mu.Unlock()
		// Before the caller wakes: what the hook records is complete when
		// the call returns.
		c.r.after(c.after, msg, err)
		close(c.done)
		// Only after done is closed: a send still waiting for its response
		// under this context then sees the call finished when its context
		// ends, and does not report the cancellation as a failed send.
		if c.cancelCtx != nil {
			c.cancelCtx()
		}
	})
}

// onReply runs on the host poller's goroutine with the reply, which the
// host deletes after it returns, or with an error.
func (c *Call) onReply(m types.Message, err error) {
	if err != nil {
		if errors.Is(err, sqsapi.ErrClosed) {
			c.finish(nil, sqsapi.ErrClosed)
			return
		}
		c.r.failed.Add(1)
		c.finish(nil, fmt.Errorf("requester: waiting for the response to %s: %w", c.requestID, err))
		return
	}
	if _, ok := payload.ParsePointer(m); ok {
		// Not on the host's poller: the read may take long.
		c.r.background(func() { c.fetchReply(m) })
		return
	}
	c.decoded(m)
}

// decoded finishes the call with its reply m, inflated if it travelled
// compressed.
func (c *Call) decoded(m types.Message) {
	m, _, err := payload.Decode(m)
	if err != nil {
		c.r.failed.Add(1)
		c.finish(nil, badResponse(c.requestID, err))
		return
	}
	c.r.replied.Add(1)
	c.finish(&m, nil)
}

// onContextDone runs when the call's context ends before the response.
func (c *Call) onContextDone(ctx context.Context) {
	if !c.withdraw() {
		return // the response is being delivered
	}
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		c.r.timedOut.Add(1)
		err = &timeoutError{requestID: c.requestID, queueURL: c.queueURL, waited: time.Since(c.sentAt)}
	}
	c.finish(nil, err)
}

// SendMessageAndGetResponse sends a request and waits for its response: the
// reply message with its body and message attributes (of its system
// attributes only AWSTraceHeader is requested, to save decoding the rest
// on every reply). The
// context bounds the whole call (Options.Timeout applies when it has no
// deadline). A timeout returns an error matching ErrTimeout and
// context.DeadlineExceeded; a failed send returns the send's error.
func (r *Requester) SendMessageAndGetResponse(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*types.Message, error) {
	call, err := r.sendRequest(ctx, in, optFns, false)
	if err != nil {
		return nil, err
	}
	// This goroutine waits anyway, so it watches the context itself rather
	// than register a callback on it for every request.
	select {
	case <-call.done:
	case <-call.waitCtx.Done():
		call.onContextDone(call.waitCtx)
		<-call.done
	}
	return call.msg, call.err
}

// SendMessageAndGetResponseAsync sends a request and returns once it is
// sent; the Call delivers the response later. The context bounds the wait
// for the response (Options.Timeout applies when it has no deadline). No
// goroutine waits on the call's behalf. A nil option function is an
// *sqsapi.InvalidInputError; a panic while sending reaches the caller
// after the call is withdrawn.
func (r *Requester) SendMessageAndGetResponseAsync(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*Call, error) {
	return r.sendRequest(ctx, in, optFns, true)
}

// sendRequest is SendMessageAndGetResponseAsync; watch makes the call watch
// its context with a callback, and without it the caller must (waitCtx).
func (r *Requester) sendRequest(ctx context.Context, in *sqs.SendMessageInput, optFns []func(*sqs.Options), watch bool) (*Call, error) {
	const op = "requester.SendMessageAndGetResponse"
	in, replyName, after := r.onSend(ctx, in, 0)
	requestID, attrs, body, offload, err := r.checkRequest(op, in, compressOrOffload)
	if err == nil {
		for i, fn := range optFns {
			if fn == nil {
				// The SDK would panic on it after the call was registered.
				err = wire.Invalid(op, "optFns", "option function %d is nil", i)
				break
			}
		}
	}
	r.mu.Lock()
	if err == nil && r.closed {
		err = sqsapi.ErrClosed
	}
	r.mu.Unlock()
	if err != nil {
		r.after(after, nil, err)
		return nil, err
	}
	if requestID == "" {
		requestID = replyName
	}
	call := &Call{r: r, replyName: replyName, requestID: requestID, queueURL: aws.ToString(in.QueueUrl), done: make(chan struct{}), after: after}
	// Expect the reply before sending, so no reply can come too early.
	if call.host, err = r.expect(ctx, call); err != nil {
		err = r.closedErr(err)
		call.finish(nil, err)
		return nil, err
	}
	waitCtx := ctx
	if _, ok := ctx.Deadline(); !ok && r.opts.Timeout > 0 {
		waitCtx, call.cancelCtx = context.WithTimeout(ctx, r.opts.Timeout)
	}
	call.waitCtx = waitCtx
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		call.withdraw()
		call.finish(nil, sqsapi.ErrClosed)
		return nil, sqsapi.ErrClosed
	}
	r.pending[call] = struct{}{}
	select {
	case <-call.done:
		// Finished already (the host failed or closed): finish ran before
		// the insertion and could not remove it.
		delete(r.pending, call)
	default:
	}
	r.mu.Unlock()

	attrs[sqsapi.ResponseQueueURLAttribute] = wire.StringAttribute(wire.VirtualQueueURL(call.host.URL(), replyName))
	attrs[sqsapi.RequestIDAttribute] = wire.StringAttribute(requestID)
	if offload {
		deadline, _ := waitCtx.Deadline()
		p, err := payload.Offload(waitCtx, r.opts.PayloadStore, *body, attrs, deadline)
		if err != nil {
			r.failed.Add(1)
			err = fmt.Errorf("%s: %w", op, err)
			call.withdraw()
			call.finish(nil, err)
			return nil, err
		}
		call.object = &p
		body = aws.String(p.String())
	}
	r.stamp(waitCtx, body, call.queueURL, attrs, true)
	req := *in
	req.MessageBody, req.MessageAttributes = body, attrs
	req.MessageGroupId, req.MessageDeduplicationId = fifoRequestIDs(&req, requestID)
	call.sentAt = time.Now()
	if err := r.sendCall(waitCtx, op, call, &req, optFns); err != nil {
		select {
		case <-call.done:
			if call.err == nil {
				// The reply arrived before the send's own response, and
				// finishing the call cancelled the send's context: the
				// request got through.
				return call, nil
			}
		default:
		}
		if errors.Is(err, context.DeadlineExceeded) && callbound.Ended(waitCtx) {
			r.timedOut.Add(1)
			te := &timeoutError{requestID: requestID, queueURL: call.queueURL, waited: time.Since(call.sentAt)}
			if awserr.IsTransient(err) {
				te.sendErr = err // the deadline cut the send's retries short
			}
			err = te
		} else {
			r.failed.Add(1)
			err = r.closedErr(err)
		}
		call.withdraw()
		call.finish(nil, err)
		r.dropObject(call.object) // nobody will read it
		return nil, err
	}

	// Watch the context only now: a send that outlives the deadline must
	// report its own error, not a timeout.
	if !watch {
		return call, nil
	}
	call.mu.Lock()
	if !call.finished {
		call.stopWatch = context.AfterFunc(waitCtx, func() { call.onContextDone(waitCtx) })
	}
	call.mu.Unlock()
	return call, nil
}

// onSend names a new request's reply queue, runs Options.Propagator on a
// copy of in whose attribute maps (never nil) it may add to, and tells
// Options.Observer of the request under the context the propagator
// returned. own is how many attributes the requester adds besides the
// reply route (a stream's TempQueues.Stream). It returns the copy (in
// itself without a propagator), the reply queue's name (also the request
// id when the caller set none) and the observer's done func (nil without
// an observer).
func (r *Requester) onSend(ctx context.Context, in *sqs.SendMessageInput, own int) (*sqs.SendMessageInput, string, func(*types.Message, error)) {
	replyName := uuid.NewString()
	obs, prop := r.opts.Observer, r.opts.Propagator
	if obs == nil && prop == nil || in == nil {
		return in, replyName, nil
	}
	queueURL := aws.ToString(in.QueueUrl)
	requestID := replyName
	room := sqsapi.MaxMessageAttributes - len(in.MessageAttributes) - 1 - own // ResponseQueueUrl, own
	if v, ok := in.MessageAttributes[sqsapi.RequestIDAttribute]; ok {
		requestID = aws.ToString(v.StringValue)
	} else {
		room--
	}
	if wire.IsVirtualQueueURL(queueURL) {
		room-- // the routing attribute
	}
	e := observe.Event{Kind: observe.Send, Queue: queueURL, RequestID: requestID,
		Message: &types.Message{Body: in.MessageBody, MessageAttributes: in.MessageAttributes}}
	if prop != nil {
		cp := *in
		cp.MessageAttributes = make(map[string]types.MessageAttributeValue, len(in.MessageAttributes)+1)
		maps.Copy(cp.MessageAttributes, in.MessageAttributes)
		cp.MessageSystemAttributes = make(map[string]types.MessageSystemAttributeValue, len(in.MessageSystemAttributes)+1)
		maps.Copy(cp.MessageSystemAttributes, in.MessageSystemAttributes)
		ctx = callback.Inject(ctx, r.log, prop, e, cp.MessageAttributes, cp.MessageSystemAttributes, room)
		in, e.Message.MessageAttributes = &cp, cp.MessageAttributes
	}
	if obs == nil {
		return in, replyName, nil
	}
	return in, replyName, callback.Observe(ctx, r.log, obs, e)
}

// asLateReplies tells obs of what the host queue settles for nobody, its
// orphans told as the late replies they are (Dropped, "late-reply").
func asLateReplies(obs observe.Observer) observe.Observer {
	if obs == nil {
		return nil
	}
	return observe.Func(func(ctx context.Context, e observe.Event) func(*types.Message, error) {
		if e.Kind == observe.Dropped && e.Reason == "orphan" {
			e.Reason = "late-reply"
		}
		return obs.Observe(ctx, e)
	})
}

// tellLate tells Options.Observer of a reply to a stream that stopped
// early: the host deletes it unread.
func (r *Requester) tellLate(hostURL string, m types.Message, requestID string) {
	callback.Observe(context.Background(), r.log, r.opts.Observer, observe.Event{Kind: observe.Dropped, Queue: hostURL, Message: &m, RequestID: requestID, Reason: "late-reply"})
}

// after runs the observer's done func, if any, with a call's result.
func (r *Requester) after(fn func(*types.Message, error), msg *types.Message, err error) {
	if fn != nil {
		fn(msg, err)
	}
}

// sendCall sends call's request. A panic in the send (an option function
// of the caller's, or the caller's client) reaches the caller, as it would
// from *sqs.Client, but only after the call is withdrawn and finished, so
// that no pending call or expected reply outlives it.
func (r *Requester) sendCall(ctx context.Context, op string, call *Call, req *sqs.SendMessageInput, optFns []func(*sqs.Options)) error {
	defer func() {
		if p := recover(); p != nil {
			r.failed.Add(1)
			call.withdraw()
			call.finish(nil, fmt.Errorf("%s: sending request %s panicked: %v", op, call.requestID, p))
			panic(p)
		}
	}()
	return r.send(ctx, op, req, optFns)
}

// expect registers call's reply on the current host, opening one first
// when there is none or it was found deleted (concurrent callers share the
// new one). A host found deleted between the two gets one more try.
func (r *Requester) expect(ctx context.Context, call *Call) (*hostq.Host, error) {
	tag := call.queueURL
	if wire.IsVirtualQueueURL(tag) {
		tag, _, _ = wire.ParseVirtualQueueURL(tag) // checked by checkRequest
	}
	return r.expectWith(ctx, func(h *hostq.Host) error { return h.ExpectJoin(call.replyName, tag, call.onPart) })
}

// answering tells the request sends, before a receive wakes its callers,
// how many of them sent their requests to each queue: callers in a loop
// send their next request there at once, and those requests then share a
// call instead of racing each other out (internal/batch's Announce, which
// stops heeding a queue's announcements when they go unfulfilled, as for
// callers that send no next request).
func (r *Requester) answering(counts []batch.Count) { r.core.Announce(counts) }

// expectWith is expect for any registration on the host.
func (r *Requester) expectWith(ctx context.Context, register func(*hostq.Host) error) (*hostq.Host, error) {
	for attempt := 0; ; attempt++ {
		host := r.host.Load()
		if host == nil || host.Closed() {
			var err error
			if host, err = r.core.Open(ctx, r.opts.HostQueueAttributes); err != nil {
				return nil, err
			}
			r.host.Store(host)
		}
		err := register(host)
		if err == nil || attempt > 0 || !awserr.IsQueueDoesNotExist(err) {
			return host, err
		}
	}
}

// closedErr makes an error caused by closing match sqsapi.ErrClosed.
func (r *Requester) closedErr(err error) error {
	if err == nil || errors.Is(err, sqsapi.ErrClosed) {
		return err
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: %w", sqsapi.ErrClosed, err)
	}
	return err
}

// send sends the request of the caller's operation op through the core's
// sender, coalescing concurrent sends to one queue. A request to a virtual
// queue goes to its host queue with the routing attribute. An SQS error
// names op and the caller's queue.
func (r *Requester) send(ctx context.Context, op string, in *sqs.SendMessageInput, optFns []func(*sqs.Options)) error {
	to := aws.ToString(in.QueueUrl)
	if wire.IsVirtualQueueURL(to) {
		hostURL, name, _ := wire.ParseVirtualQueueURL(to) // checked by checkRequest
		in.QueueUrl = aws.String(hostURL)
		in.MessageAttributes[sqsapi.VirtualQueueNameAttribute] = wire.StringAttribute(name)
	}
	_, err := r.core.Send(ctx, op, to, in, optFns)
	return err
}

// compression says what checkRequest does with a request's body when
// Options.CompressRequests is set.
type compression int

const (
	noCompression     compression = iota // the body goes as it is (through a topic)
	compressIfNeeded                     // a check alone: compressed only to see whether it fits
	compressIfPays                       // a send: compressed when that pays
	compressOrOffload                    // a call's send: compressed when that pays, to the PayloadStore when it does not fit
)

// checkRequest validates a request before any call and returns the
// caller's own request id, if set, a copy of the attributes and the body
// to send: with Options.CompressRequests and compress, the placeholder of
// a body compressed into the copy's TempQueues.Body (payload.Encode). own
// names the attributes the requester adds beside the reply route
// (TempQueues.Stream, TempQueues.Origin): the caller may not set them, and
// they count against SQS's limit. The size is checked on what is sent:
// the body, compressed or not, and the attributes.
//
// With compressOrOffload and Options.PayloadStore, a body that does not
// fit even compressed is returned plain, offload true: the caller puts
// it in the store (payload.Offload) and sends the pointer.
func (r *Requester) checkRequest(op string, in *sqs.SendMessageInput, compress compression, own ...string) (requestID string, attrs map[string]types.MessageAttributeValue, body *string, offload bool, err error) {
	if in == nil {
		return "", nil, nil, false, wire.Invalid(op, "input", "nil")
	}
	if aws.ToString(in.QueueUrl) == "" {
		return "", nil, nil, false, wire.Invalid(op, "QueueUrl", "empty")
	}
	if wire.IsVirtualQueueURL(*in.QueueUrl) {
		if _, _, err := wire.ParseVirtualQueueURL(*in.QueueUrl); err != nil {
			return "", nil, nil, false, err
		}
	}
	if err := wire.CheckDelaySeconds(op, in.DelaySeconds); err != nil {
		return "", nil, nil, false, err
	}
	if err := checkFIFORequest(op, in); err != nil {
		return "", nil, nil, false, err
	}
	if aws.ToString(in.MessageBody) == "" {
		return "", nil, nil, false, wire.Invalid(op, "MessageBody", "empty (SQS requires a body)")
	}
	for _, name := range append([]string{sqsapi.ResponseQueueURLAttribute, sqsapi.DeadlineAttribute, payload.AcceptAttribute, payload.BodyAttribute}, own...) {
		if _, ok := in.MessageAttributes[name]; ok {
			return "", nil, nil, false, wire.Invalid(op, "MessageAttributes", "%s is set by the requester", name)
		}
	}
	extra := 2 + len(own)
	if v, ok := in.MessageAttributes[sqsapi.RequestIDAttribute]; ok {
		requestID = aws.ToString(v.StringValue)
		if requestID == "" || aws.ToString(v.DataType) != "String" {
			return "", nil, nil, false, wire.Invalid(op, "MessageAttributes", "%s must be a non-empty String", sqsapi.RequestIDAttribute)
		}
		extra--
	}
	if wire.IsVirtualQueueURL(*in.QueueUrl) {
		extra++ // the routing attribute
	}
	if err := wire.CheckMessageAttributes(op, in.MessageAttributes, extra); err != nil {
		return "", nil, nil, false, err
	}
	if err := wire.CheckSystemAttributes(op, in.MessageSystemAttributes); err != nil {
		return "", nil, nil, false, err
	}
	if err := wire.CheckMessageText(op, in.MessageBody, in.MessageAttributes); err != nil {
		return "", nil, nil, false, err
	}
	// Budget the attributes we add with a full-length reply URL (a host URL
	// and a UUID) and request id, and the routing attribute.
	const added = len(sqsapi.ResponseQueueURLAttribute) + len("String") + 200 +
		len(sqsapi.RequestIDAttribute) + len("String") + 36 +
		len(sqsapi.VirtualQueueNameAttribute) + len("String") + wire.MaxQueueNameLength
	attrs = make(map[string]types.MessageAttributeValue, len(in.MessageAttributes)+5)
	maps.Copy(attrs, in.MessageAttributes)
	body = in.MessageBody
	n := wire.MessageSize(body, attrs) + added
	limit := sqsapi.MaxMessageSize
	if compress == compressOrOffload {
		limit = payload.Limit(r.opts.PayloadStore)
	}
	if r.opts.CompressRequests && (compress >= compressIfPays || compress == compressIfNeeded && n > sqsapi.MaxMessageSize) {
		// A body that fits as it is fits compressed: the carrier is
		// smaller, or not used.
		if b, ok := payload.EncodeWithin(*body, attrs, sqsapi.MaxMessageAttributes-len(attrs)-extra, limit); ok {
			body = &b
			n = wire.MessageSize(body, attrs) + added
		}
	}
	if n > limit {
		if len(*in.MessageBody) > payload.MaxPayload {
			return "", nil, nil, false, wire.Invalid(op, "MessageBody", "body of %d bytes exceeds the maximum payload of %d MiB", len(*in.MessageBody), payload.MaxPayload>>20)
		}
		if compress == compressOrOffload && r.opts.PayloadStore != nil {
			delete(attrs, payload.BodyAttribute)
			if len(attrs)+extra+1 > sqsapi.MaxMessageAttributes {
				return "", nil, nil, false, wire.Invalid(op, "MessageAttributes", "no place left among SQS's %d attributes for %s, which a body sent through Options.PayloadStore needs", sqsapi.MaxMessageAttributes, payload.SizeAttribute)
			}
			if wire.MessageSize(aws.String(""), attrs)+added+payload.PointerBytes > sqsapi.MaxMessageSize {
				return "", nil, nil, false, wire.Invalid(op, "MessageAttributes", "attributes too large to leave room for a payload pointer")
			}
			return requestID, attrs, in.MessageBody, true, nil
		}
		how, hint := "", ""
		if _, ok := attrs[payload.BodyAttribute]; ok {
			how = " compressed"
		}
		if compress == compressOrOffload {
			hint = " (set Options.PayloadStore to send it through S3)"
		}
		return "", nil, nil, false, wire.Invalid(op, "MessageBody", "message of %d bytes%s with the attributes the requester adds exceeds the SQS maximum of %d%s", n, how, sqsapi.MaxMessageSize, hint)
	}
	return requestID, attrs, body, false, nil
}

// Stats are counters of a Requester.
type Stats struct {
	TimedOut int64 // requests whose deadline passed first
	Failed   int64 // sends that failed, or waits ended by an error
	Pending  int   // requests waiting for a response now
	// LateReplies counts messages on the host queue that no pending request
	// could take (mostly responses after a timeout): deleted, counted,
	// logged once each; and replies to streams that stopped early.
	LateReplies int64
	// Calls counts SQS API requests by operation as SQS bills them and
	// sqsclient.CallCounter counts them (each attempt, the SDK's retries
	// included), heartbeats and sweeps excluded.
	Calls map[string]int64
}

// Stats returns the requester's counters.
func (r *Requester) Stats() Stats {
	r.mu.Lock()
	n := len(r.pending)
	r.mu.Unlock()
	return Stats{
		TimedOut: r.timedOut.Load(), Failed: r.failed.Load(),
		Pending: n, LateReplies: r.counters.Orphaned.Load() + r.late.Load(), Calls: r.core.Calls(),
	}
}

// Close fails pending requests with sqsapi.ErrClosed, flushes request sends and
// reply deletes, stops the poller and the reaper, and deletes this
// process's host queue. It returns when done or when ctx ends (with ctx's
// error, the rest abandoned), nil when nothing had to be abandoned; it is
// idempotent.
func (r *Requester) Close(ctx context.Context) error {
	return r.closer.Do(ctx, func() error {
		r.mu.Lock()
		r.closed = true
		calls := make([]*Call, 0, len(r.pending))
		for c := range r.pending {
			calls = append(calls, c)
		}
		sessions := make([]*Session, 0, len(r.sessions))
		for s := range r.sessions {
			sessions = append(sessions, s)
		}
		r.mu.Unlock()
		for _, c := range calls {
			if c.withdraw() {
				c.finish(nil, sqsapi.ErrClosed)
			}
		}
		// Their handlers are told to stop: the cancels go out with the
		// sends Close flushes.
		for _, s := range sessions {
			s.Close()
		}
		// The host queue's heartbeats stop before its delete; the reaper
		// closes after it. Its poller is then stopped, and starts no more
		// payload reads or deletions: wait for those running.
		err := r.core.Close(ctx)
		if werr := lifecycle.Wait(ctx, &r.payloadWork); werr != nil && err == nil {
			err = fmt.Errorf("requester: Close: reading or deleting payloads: %w", werr)
		}
		return err
	})
}

// reaperConfig sets the reaper's sweep period and Observer (the core sets
// its Prefix, Logger and DisableSweeping), and makes the Detail of Swept
// events a reaper.Report.
func reaperConfig(opts Options) []func(*reap.Config) {
	return []func(*reap.Config){func(c *reap.Config) {
		c.Period, c.Observer = opts.SweepPeriod, opts.Observer
		c.Detail = func(t reap.Tally) any {
			return reaper.Report{Listed: t.Listed, Kept: t.Kept(), Deleted: t.Deleted, Errors: t.Errors}
		}
	}}
}

// stamp puts on a request to queueURL, whose body and attributes are
// body and attrs, what the requester adds when the message has room for
// it: ctx's deadline, so that a responder drops the request unhandled once
// its caller has given up, then the offer of compressed replies (unless
// Options.DisableCompression) and, with parts (a call, which waits for
// one reply), of a reply in parts.
func (r *Requester) stamp(ctx context.Context, body *string, queueURL string, attrs map[string]types.MessageAttributeValue, parts bool) {
	if d, ok := ctx.Deadline(); ok {
		wire.StampDeadline(attrs, body, queueURL, d)
	}
	payload.Advertise(attrs, body, queueURL, payload.Offer(!r.opts.DisableCompression, parts))
}
