package virtualqueue

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Client is an SQS client that serves virtual queues. It has the method
// signatures of *sqs.Client (it implements sqsapi.Client); calls on real queue
// URLs pass through to the wrapped client. It is safe for concurrent use. Its
// background work (host pollers, expiry, batch calls) stops on Close.
type Client struct {
	sqs   sqsapi.Client // the wrapped client, counting calls
	calls *sqsapi.CallCounter
	opts  Options
	log   *slog.Logger

	deletes *batch.Deletes
	vis     *batch.Visibilities
	sends   *batch.Sends

	ctx    context.Context // cancelled by Close: stops pollers and timers
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the client starts, but batch calls
	closed atomic.Bool

	mu    sync.Mutex
	hosts map[string]*host

	closeOnce sync.Once
	closeDone chan struct{}
	closeErr  error

	routed, orphaned, released, expired, overflowed atomic.Int64
	queues                                          atomic.Int64
}

var _ sqsapi.Client = (*Client)(nil)

// New returns a Client serving virtual queues over client. An *sqs.Client
// is used through a copy with sqsapi.BufferRequestBodies installed (see
// sqsapi.EnsureBufferedBodies); the caller's client is not modified.
func New(client sqsapi.Client, optFns ...func(*Options)) *Client {
	var opts Options
	for _, fn := range optFns {
		fn(&opts)
	}
	opts.setDefaults()
	calls := new(sqsapi.CallCounter)
	wrapped := counting{next: sqsapi.EnsureBufferedBodies(client), n: calls}
	ctx, cancel := context.WithCancel(context.Background())
	return &Client{
		sqs:       wrapped,
		calls:     calls,
		opts:      opts,
		log:       opts.Logger,
		deletes:   batch.NewDeletes(wrapped, opts.MaxBatchCalls, batch.DeleteLinger),
		vis:       batch.NewVisibilities(wrapped, opts.MaxBatchCalls),
		sends:     batch.NewSends(wrapped, opts.MaxBatchCalls),
		ctx:       ctx,
		cancel:    cancel,
		hosts:     make(map[string]*host),
		closeDone: make(chan struct{}),
	}
}

// Stats are counters of a Client since New.
type Stats struct {
	// Calls counts the SQS API calls the client made, by operation
	// ("ReceiveMessage", "DeleteMessageBatch", ...), pass-through calls
	// included.
	Calls map[string]int64
	// Routed counts host messages routed to a virtual queue.
	Routed int64
	// Orphaned counts host messages no virtual queue could take.
	Orphaned int64
	// Released counts buffered messages made visible again unread (near their
	// host visibility timeout, on deletion of their virtual queue with the
	// release policy, or on Close).
	Released int64
	// Overflowed counts messages released because their virtual queue's
	// buffer was full.
	Overflowed int64
	// Expired counts virtual queues deleted for idleness.
	Expired int64
	// VirtualQueues is the number of live virtual queues.
	VirtualQueues int64
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	return Stats{
		Calls:         c.calls.Snapshot(),
		Routed:        c.routed.Load(),
		Orphaned:      c.orphaned.Load(),
		Released:      c.released.Load(),
		Overflowed:    c.overflowed.Load(),
		Expired:       c.expired.Load(),
		VirtualQueues: c.queues.Load(),
	}
}

// Close stops the host pollers, wakes waiting receivers with ErrClosed,
// releases every buffered message (ChangeMessageVisibilityBatch) and flushes
// pending deletes and visibility changes. Released messages become visible
// at once, or, when Close cancelled a long poll, as soon as that poll's wait
// has surely ended on the server (at most PollWaitTime plus 2 s): SQS can
// hand messages to a poll whose client went away, which would hide them for
// a whole visibility timeout and count a receive against their
// maxReceiveCount. It returns when all of the
// client's goroutines have stopped, or with ctx's error when ctx ends first
// (the remaining work still completes in the background). Close is
// idempotent; the wrapped client stays usable. Calls on real queue URLs still
// pass through after Close; calls on virtual URLs fail with ErrClosed, except
// DeleteMessage, which still deletes.
func (c *Client) Close(ctx context.Context) error {
	c.closeOnce.Do(func() { go c.shutdown() })
	select {
	case <-c.closeDone:
		return c.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) shutdown() {
	defer close(c.closeDone)
	c.mu.Lock()
	c.closed.Store(true)
	c.mu.Unlock()
	c.cancel()
	c.mu.Lock()
	hosts := make([]*host, 0, len(c.hosts))
	for _, h := range c.hosts {
		hosts = append(hosts, h)
	}
	c.mu.Unlock()
	// Marking each host closed under its lock guarantees that no poller
	// starts after wg.Wait begins.
	for _, h := range hosts {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
	}
	c.wg.Wait()
	for _, h := range hosts {
		h.shutdown()
	}
	bg := context.Background()
	c.closeErr = errors.Join(c.sends.Close(bg), c.vis.Close(bg), c.deletes.Close(bg))
}

// host returns the host state for a virtual queue URL's host, or nil.
func (c *Client) lookupHost(hostURL string) *host {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hosts[hostURL]
	if h != nil && !h.isReady() {
		return nil
	}
	return h
}

// lookup resolves a virtual queue URL to its live queue. The error matches
// *types.QueueDoesNotExist when the queue is not known here.
func (c *Client) lookup(op, queueURL string) (*host, *vqueue, error) {
	hostURL, name, err := sqsapi.ParseVirtualQueueURL(queueURL)
	if err != nil {
		return nil, nil, withOp(err, op)
	}
	if c.closed.Load() {
		return nil, nil, ErrClosed
	}
	h := c.lookupHost(hostURL)
	if h == nil {
		return nil, nil, sqsapi.NewQueueDoesNotExist("virtual queue " + queueURL + " does not exist")
	}
	h.mu.Lock()
	q := h.queues[name]
	h.mu.Unlock()
	if q == nil {
		return nil, nil, sqsapi.NewQueueDoesNotExist("virtual queue " + queueURL + " does not exist")
	}
	return h, q, nil
}

// withOp fills in the operation of an input error.
func withOp(err error, op string) error {
	var ie *sqsapi.InvalidInputError
	if errors.As(err, &ie) && ie.Op == "" {
		cp := *ie
		cp.Op = op
		return &cp
	}
	return err
}

// GetQueueUrl passes through: virtual queues have no name lookup.
func (c *Client) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return c.sqs.GetQueueUrl(ctx, in, optFns...)
}

// ListQueues passes through: virtual queues are not listed.
func (c *Client) ListQueues(ctx context.Context, in *sqs.ListQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error) {
	return c.sqs.ListQueues(ctx, in, optFns...)
}

func queueURLOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
