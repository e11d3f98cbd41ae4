// Package tempqueue is the drop-in "temporary queue" client: every
// CreateQueue makes a virtual queue on a host queue that the client creates
// on demand, one host queue per distinct set of queue attributes. Host queues
// are named <prefix><uuid>-<n> (the Java Temporary Queue Client's format),
// tagged for the reaper, heartbeated while the client lives, and deleted by
// Close; a reaper in any process deletes those of a process that died.
//
// Code that creates short-lived queues (a reply queue per job, a queue per
// session) keeps its *sqs.Client calls and gets queues that cost no API call
// to create or delete and cannot be left behind.
package tempqueue

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/callbound"
	"github.com/tempqueues/tempqueues/internal/core"
	"github.com/tempqueues/tempqueues/internal/deflog"
	"github.com/tempqueues/tempqueues/internal/hostq"
	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/virtualqueue"
)

// Options configure a Client. Zero values mean the documented defaults.
type Options struct {
	// Prefix starts the name of every host queue; default ("")
	// sqsapi.DefaultQueuePrefix. Host queue names are the prefix, a UUID, '-'
	// and a counter, at most 80 characters, so the prefix has at most 40
	// (35 when FIFO host queues add ".fifo").
	Prefix string
	// IdleQueueRetention is how long a host queue, and a virtual queue made
	// by CreateQueue, may stay idle before a reaper deletes it; default
	// (0) 300 s, at least 1 s.
	IdleQueueRetention time.Duration
	// HostQueueTags are the user's tags (cost allocation, ownership) for
	// every host queue, set in its CreateQueue together with the reaper's
	// two tags; heartbeats leave them in place. New rejects tags SQS would
	// refuse (keys of 1 to 128 and values of at most 256 characters of
	// letters, digits, spaces and _ . : / = + - @, no "aws:" prefix), more
	// than 48 of them (SQS's 50 less the reaper's), and the reaper's keys
	// (__IdleQueueRetentionPeriodSeconds and
	// __AmazonSQSIdleQueueDeletingClient.LastHeartbeatTimestamp).
	HostQueueTags map[string]string
	// DisableSweeping stops this process from taking part in the fleet's
	// sweeps of idle host queues; it still heartbeats its own.
	DisableSweeping bool
	// SweepPeriod is how often the fleet sweeps (reaper.Options.Period);
	// every process of a fleet should use the same. Default (0) 5 minutes.
	SweepPeriod time.Duration
	// Logger receives operational warnings and debug records; nil means
	// slog.Default(), as docs/architecture.md#conventions says.
	Logger *slog.Logger
	// Observer, if set, is told what the client's reaper finds (QueueGone
	// when a host queue was found deleted; Swept after a sweep this
	// process ran, with a reaper.Report as Detail) and what its virtual
	// queues settle for nobody (virtualqueue.Options.Observer).
	Observer observe.Observer
}

// Client is a drop-in SQS client whose CreateQueue makes temporary queues.
// Every other method is the embedded virtual-queue client's: calls on real
// queue URLs pass through, calls on virtual URLs are served locally.
type Client struct {
	*virtualqueue.Client
	opts Options
	core *core.Core // owns the host queues and runs their reaper
}

// New returns a Client over client and starts its reaper (heartbeats and,
// unless disabled, the fleet's sweeps). It validates the options and makes
// no API call itself; host queues are created on first use.
func New(client sqsapi.Client, optFns ...func(*Options)) (*Client, error) {
	const op = "tempqueue.New"
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
	opts.Logger = deflog.Or(opts.Logger)
	if opts.IdleQueueRetention == 0 {
		opts.IdleQueueRetention = wire.DefaultIdleQueueRetention
	}
	c := &Client{opts: opts}
	cc, err := core.New(op, client, core.Options{
		Logger:          opts.Logger,
		Prefix:          opts.Prefix,
		Retention:       opts.IdleQueueRetention,
		Tags:            opts.HostQueueTags,
		DisableSweeping: opts.DisableSweeping,
		OnGone:          c.hostGone,
		Reaper: []func(*reap.Config){func(rc *reap.Config) {
			rc.Period, rc.Observer = opts.SweepPeriod, opts.Observer
			rc.Detail = func(t reap.Tally) any {
				return reaper.Report{Listed: t.Listed, Kept: t.Kept(), Deleted: t.Deleted, Errors: t.Errors}
			}
		}},
	})
	if err != nil {
		return nil, err
	}
	c.core = cc
	// Host queues are this client's own: a lingering poller takes nobody
	// else's messages.
	vc, err := virtualqueue.New(client, func(o *virtualqueue.Options) {
		o.Logger, o.Observer = opts.Logger, opts.Observer
		o.Linger = true
	})
	if err != nil {
		return nil, errors.Join(err, cc.Close(context.Background()))
	}
	c.Client = vc
	return c, nil
}

// hostGone drops the virtual queues of a host queue found deleted: deleting
// it through the virtual-queue client (the queue is gone already, so the
// call only confirms it) makes that client forget the host.
func (c *Client) hostGone(url string) {
	ctx, cancel := callbound.Context(context.Background(), 0)
	defer cancel()
	_, _ = c.Client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
}

// CreateQueue makes a temporary queue: a virtual queue named in.QueueName on
// this client's host queue for in.Attributes (created on first use), which
// expires after IdleQueueRetention of idleness (or the
// IdleQueueRetentionPeriodSeconds attribute, when given). With the
// HostQueueUrl attribute it makes a virtual queue on that host instead, as
// virtualqueue.Client does.
//
// A FIFO temporary queue is asked for as from SQS: a name ending in ".fifo"
// and the attribute FifoQueue true (one without the other is an
// *sqsapi.InvalidInputError), with ContentBasedDeduplication,
// DeduplicationScope and FifoThroughputLimit if wanted. It is a virtual
// queue of that name on a FIFO host queue (<prefix><uuid>-<n>.fifo, so
// the prefix has at most 35 characters), one per such attribute set, and
// keeps its messages in send order (see package virtualqueue).
func (c *Client) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	if in == nil {
		return nil, wire.Invalid("tempqueue.CreateQueue", "input", "nil")
	}
	if _, ok := in.Attributes[sqsapi.HostQueueURLAttribute]; ok {
		return c.Client.CreateQueue(ctx, in, optFns...)
	}
	hostAttrs := maps.Clone(in.Attributes)
	retention := strconv.Itoa(int(c.opts.IdleQueueRetention / time.Second))
	if r, ok := hostAttrs[sqsapi.IdleQueueRetentionPeriodAttribute]; ok {
		if n, err := strconv.Atoi(r); err != nil || n < 1 {
			return nil, wire.Invalid("tempqueue.CreateQueue", sqsapi.IdleQueueRetentionPeriodAttribute, "%q must be a whole number of seconds, at least 1", r)
		}
		retention = r
		delete(hostAttrs, sqsapi.IdleQueueRetentionPeriodAttribute)
	}
	if !wire.ValidQueueName(aws.ToString(in.QueueName)) {
		return nil, wire.Invalid("tempqueue.CreateQueue", "QueueName", "%q must be 1-80 characters of A-Z a-z 0-9 - _", aws.ToString(in.QueueName))
	}
	if err := checkFIFO(aws.ToString(in.QueueName), hostAttrs); err != nil {
		return nil, err
	}
	if err := hostq.CheckAttributes("tempqueue.CreateQueue", hostAttrs); err != nil {
		return nil, err
	}
	if err := hostq.CheckFIFOPrefix("tempqueue.CreateQueue", c.opts.Prefix, hostAttrs); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		host, err := c.core.URL(ctx, hostAttrs)
		if err != nil {
			return nil, err
		}
		out, err := c.Client.CreateQueue(ctx, &sqs.CreateQueueInput{
			QueueName: in.QueueName,
			Tags:      in.Tags,
			Attributes: map[string]string{
				sqsapi.HostQueueURLAttribute:             host,
				sqsapi.IdleQueueRetentionPeriodAttribute: retention,
			},
		}, optFns...)
		if attempt == 0 && awserr.IsQueueDoesNotExist(err) {
			// The host queue was deleted from under us, and a receive found
			// out before a heartbeat did: make a new one.
			c.core.Gone(host)
			continue
		}
		return out, err
	}
}

// checkFIFO applies SQS's rule to a temporary queue: FifoQueue true goes
// with a name ending in ".fifo", and such a name with FifoQueue true. An
// explicit FifoQueue false is dropped from the host attributes: it is the
// standard host's.
func checkFIFO(name string, hostAttrs map[string]string) error {
	v, ok := hostAttrs[string(types.QueueAttributeNameFifoQueue)]
	fifo := ok && strings.EqualFold(v, "true")
	if ok && !fifo && strings.EqualFold(v, "false") {
		delete(hostAttrs, string(types.QueueAttributeNameFifoQueue))
	}
	if fifo != strings.HasSuffix(name, ".fifo") {
		return wire.Invalid("tempqueue.CreateQueue", "QueueName", "%q: a FIFO queue's name ends in .fifo (with FifoQueue true), and only a FIFO queue's does", name)
	}
	return nil
}

// Close closes the virtual-queue layer (waking receivers, releasing buffered
// messages, flushing deletes), stops the reaper, and deletes this client's
// host queues. It returns when done or when ctx ends (with ctx's error, the
// rest abandoned), nil when nothing had to be abandoned; it is idempotent.
func (c *Client) Close(ctx context.Context) error {
	return errors.Join(c.Client.Close(ctx), c.core.Close(ctx))
}
