package virtualqueue

import (
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/callback"
	"github.com/tempqueues/tempqueues/internal/core"
	"github.com/tempqueues/tempqueues/internal/deflog"
	"github.com/tempqueues/tempqueues/internal/hostq"
	"github.com/tempqueues/tempqueues/internal/lifecycle"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Client is an SQS client that serves virtual queues. It has the method
// signatures of *sqs.Client (it implements sqsapi.Client); calls on real queue
// URLs pass through to the wrapped client. It is safe for concurrent use. Its
// background work (host pollers, expiry, batch calls) stops on Close.
type Client struct {
	core     *core.Core    // the sender, and the calls counted
	sqs      sqsapi.Client // the wrapped client, counting calls
	opts     Options
	hostOpts hostq.Options

	hosts   hostq.Set[*hostq.Host] // by URL
	mu      sync.Mutex
	retired []*hostq.Host // found gone; closed by Close

	closer lifecycle.Once
}

var _ sqsapi.Client = (*Client)(nil)

// New returns a Client serving virtual queues over client. An *sqs.Client
// without sqsclient.BufferRequestBodies is used through a copy with it
// installed; the caller's client is not modified. A nil client, typed nil
// included, is an *sqsapi.InvalidInputError: it would otherwise panic on
// the host's pollers, beyond the caller's reach.
func New(client sqsapi.Client, optFns ...func(*Options)) (*Client, error) {
	if err := wire.CheckClient("virtualqueue.New", "client", client); err != nil {
		return nil, err
	}
	var opts Options
	for _, fn := range optFns {
		fn(&opts)
	}
	opts.Logger = deflog.Or(opts.Logger)
	c := &Client{opts: opts}
	c.hostOpts = hostq.Options{
		Logger:                   opts.Logger,
		OrphanReleaseDelay:       opts.OrphanReleaseDelay,
		PollWaitTime:             opts.PollWaitTime,
		MaxPollers:               opts.MaxPollers,
		Linger:                   opts.Linger,
		ReceiveVisibilityTimeout: opts.ReceiveVisibilityTimeout,
		Observer:                 opts.Observer,
		Orphan:                   c.orphan,
		OnGone:                   c.forget,
	}
	c.hostOpts.SetDefaults()
	cc, err := core.New("virtualqueue.New", client, core.Options{
		Logger:   opts.Logger,
		MaxSends: c.hostOpts.MaxBatchCalls,
	})
	if err != nil {
		return nil, err
	}
	c.core, c.sqs = cc, cc.Client()
	return c, nil
}

// orphan applies Options.OrphanHandler.
func (c *Client) orphan(ctx context.Context, hostURL, name string, m types.Message) hostq.OrphanAction {
	action := DeleteOrphan
	if h := c.opts.OrphanHandler; h != nil {
		// A handler that panics leaves the message in flight: it
		// reappears after its visibility timeout.
		if callback.Run(c.hostOpts.Logger, "virtualqueue: Options.OrphanHandler", func() { action = h(ctx, hostURL, name, m) }) {
			action = KeepOrphan
		}
	}
	switch action {
	case ReleaseOrphan:
		return hostq.Release
	case KeepOrphan:
		return hostq.Keep
	}
	return hostq.Delete
}

// Stats are counters of a Client since New. Options.Observer hears of
// each message the client settles for nobody.
type Stats struct {
	// Calls counts the SQS API requests the client made, by operation
	// ("ReceiveMessage", "DeleteMessageBatch", ...), pass-through calls
	// included, as SQS bills them and sqsclient.CallCounter counts them
	// (each attempt, the SDK's retries included).
	Calls map[string]int64
	// Orphaned counts host messages no virtual queue could take.
	Orphaned int64
	// VirtualQueues is the number of live virtual queues.
	VirtualQueues int64
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	n := c.hostOpts.Counters
	return Stats{Calls: c.core.Calls(), Orphaned: n.Orphaned.Load(), VirtualQueues: n.Queues.Load()}
}

// Close stops the host pollers, wakes waiting receivers with sqsapi.ErrClosed,
// releases every buffered message (ChangeMessageVisibilityBatch) and flushes
// pending sends, deletes and visibility changes. Released messages become
// visible at once, or, when Close cancelled a long poll, as soon as that
// poll's wait has surely ended on the server (at most PollWaitTime plus 2 s):
// SQS can hand messages to a poll whose client went away, which would hide
// them for a whole visibility timeout and count a receive against their
// maxReceiveCount. It returns when done, or with ctx's error when ctx ends
// first (the unflushed calls abandoned), nil when nothing was abandoned.
// Close is idempotent; the wrapped client stays usable. Calls on real queue
// URLs still pass through after Close; calls on virtual URLs fail with
// sqsapi.ErrClosed, except DeleteMessage, which still deletes.
func (c *Client) Close(ctx context.Context) error {
	return c.closer.Do(ctx, func() error {
		hosts := c.hosts.Close()
		c.mu.Lock()
		hosts = append(hosts, c.retired...)
		c.mu.Unlock()
		return errors.Join(hostq.CloseAll(ctx, hosts), c.core.Close(ctx))
	})
}

func (c *Client) isClosed() bool { return c.hosts.Closed() }

// getHost returns the open host for hostURL, opening it on first use.
// Concurrent first uses share one GetQueueAttributes call.
func (c *Client) getHost(ctx context.Context, hostURL string) (*hostq.Host, error) {
	return c.hosts.Get(ctx, hostURL,
		func() (*hostq.Host, error) { return hostq.Open(ctx, c.sqs, hostURL, &c.hostOpts) },
		func(h *hostq.Host) { _ = h.Close(context.WithoutCancel(ctx)) })
}

// lookupHost returns the open host for hostURL, or nil.
func (c *Client) lookupHost(hostURL string) *hostq.Host {
	h, _ := c.hosts.Lookup(hostURL)
	return h
}

// forget drops a host found deleted: its virtual queues went with it.
func (c *Client) forget(h *hostq.Host) {
	if gone := c.hosts.Remove(func(x *hostq.Host) bool { return x == h }); len(gone) > 0 {
		c.mu.Lock()
		c.retired = append(c.retired, gone...)
		c.mu.Unlock()
	}
}

// lookup resolves a virtual queue URL to its live queue. The error matches
// *types.QueueDoesNotExist when the queue is not known here.
func (c *Client) lookup(op, queueURL string) (*hostq.Queue, error) {
	hostURL, name, err := wire.ParseVirtualQueueURL(queueURL)
	if err != nil {
		return nil, withOp(err, op)
	}
	if c.isClosed() {
		return nil, sqsapi.ErrClosed
	}
	if h := c.lookupHost(hostURL); h != nil {
		if q := h.Queue(name); q != nil {
			return q, nil
		}
	}
	return nil, awserr.NewQueueDoesNotExist("virtual queue " + queueURL + " does not exist")
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
