// Package core is the one object the clients stand on: the host-queue
// Owner (internal/hostq), the reaper that heartbeats the owned queues and
// takes part in the fleet's sweeps (internal/reap), and the Sender, which
// holds the send-batching policy (internal/batch). requester, tempqueue
// and virtualqueue are faces over a Core: they check their callers' input,
// shape messages and keep their own bookkeeping; the Core makes the calls.
//
// A Core built with a Prefix owns host queues: it creates them with the
// reaper's tags, heartbeats them, forgets one the reaper or a receive
// finds deleted (Owner.Gone, wired here once), and deletes them on Close.
// Without one (virtualqueue) it only sends.
package core

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/hostq"
	"github.com/tempqueues/tempqueues/internal/httpbody"
	"github.com/tempqueues/tempqueues/internal/lifecycle"
	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Options configure a Core. Zero values mean the defaults noted.
type Options struct {
	// Logger receives the core's logs; nil discards them.
	Logger *slog.Logger
	// Calls, if set, counts the calls of the sender, the owner and the
	// hosts it opens (not the reaper's); default a counter of the Core's
	// own (Calls).
	Calls *callcount.Counter

	// Prefix, when set, makes the Core own host queues named
	// <Prefix><uuid>-<n>, and run a reaper for them.
	Prefix string
	// Retention is the owned queues' idle retention (their heartbeat tag).
	Retention time.Duration
	// Tags are the user's tags of every owned queue (hostq.CheckTags).
	Tags map[string]string
	// DisableSweeping makes the reaper heartbeat only.
	DisableSweeping bool
	// Reaper are the user's reaper settings, applied after Prefix, Logger
	// and DisableSweeping.
	Reaper []func(*reap.Config)
	// Host, when set, configures the runtime Host opened over each owned
	// queue (Open); without it owned queues are known by URL only.
	Host *hostq.Options
	// OnGone is called, from a library goroutine, when an owned host
	// queue is found deleted, after the Core forgot it.
	OnGone func(url string)

	// MaxSends bounds the send calls in flight per queue; default 4.
	MaxSends int
	// PreferFewerCalls makes sends wait for company more readily: the
	// adaptive send policy without overtaking, unless the client carries
	// a policy of its own (batch.SendPolicy).
	PreferFewerCalls bool
}

// Core holds what the clients share; it is safe for concurrent use.
type Core struct {
	client sqsapi.Client // counting
	calls  *callcount.Counter
	owner  *hostq.Owner // nil without Options.Prefix
	reaper *reap.Reaper // nil without Options.Prefix
	*Sender

	closer lifecycle.Once
}

// New builds a Core over client: an *sqs.Client is used through a copy
// with sqsclient.BufferRequestBodies installed. It starts the reaper (when
// the Core owns queues) and makes no API call. op names the caller's
// constructor in errors.
func New(op string, client sqsapi.Client, o Options) (*Core, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Calls == nil {
		o.Calls = new(callcount.Counter)
	}
	policy := batch.SendPolicy(client, o.PreferFewerCalls)
	client = httpbody.Ensure(client)
	c := &Core{client: hostq.CountCalls(client, o.Calls), calls: o.Calls}
	c.Sender = newSender(c.client, o.MaxSends, policy)
	if o.Prefix == "" {
		return c, nil
	}
	if err := hostq.CheckOwner(op, o.Prefix, o.Retention); err != nil {
		return nil, err
	}
	if err := hostq.CheckTags(op, o.Tags); err != nil {
		return nil, err
	}
	// The reaper tells the owner of a host queue it found deleted; the
	// owner is made next, before the reaper heartbeats anything.
	var owner *hostq.Owner
	rp, err := reap.New(client, append([]func(*reap.Config){func(rc *reap.Config) {
		rc.Prefix, rc.Logger, rc.DisableSweeping = o.Prefix, o.Logger, o.DisableSweeping
	}}, append(o.Reaper, func(rc *reap.Config) {
		rc.Observer = observe.Join(observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
			if e.Kind == observe.QueueGone {
				owner.Gone(e.Queue)
			}
			return nil
		}), rc.Observer)
	})...)...)
	if err != nil {
		return nil, err
	}
	owner, err = hostq.NewOwner(op, client, hostq.OwnerOptions{
		Prefix:     o.Prefix,
		Retention:  o.Retention,
		Heartbeats: rp,
		Tags:       o.Tags,
		Logger:     o.Logger,
		Calls:      o.Calls,
		Host:       o.Host,
		OnGone:     o.OnGone,
	})
	if err != nil {
		return nil, errors.Join(err, rp.Close(context.Background()))
	}
	c.owner, c.reaper = owner, rp
	return c, nil
}

// Client is the client the Core calls through, counting calls.
func (c *Core) Client() sqsapi.Client { return c.client }

// Calls returns the calls counted so far, by operation.
func (c *Core) Calls() map[string]int64 { return c.calls.Snapshot() }

// Open returns the runtime Host over the owned host queue for attrs,
// creating it on first use (Options.Host must be set).
func (c *Core) Open(ctx context.Context, attrs map[string]string) (*hostq.Host, error) {
	return c.owner.Open(ctx, attrs)
}

// URL returns the URL of the owned host queue for attrs, creating it on
// first use.
func (c *Core) URL(ctx context.Context, attrs map[string]string) (string, error) {
	return c.owner.URL(ctx, attrs)
}

// Gone forgets an owned host queue found deleted; the next use creates a
// new one.
func (c *Core) Gone(url string) { c.owner.Gone(url) }

// Reaper returns the reaper of the owned queues, nil without any.
func (c *Core) Reaper() *reap.Reaper { return c.reaper }

// Close flushes the sends, closes the owned queues' Hosts, deletes the
// queues and stops the reaper after them (their heartbeats stop before
// their deletes). It returns when done or when ctx ends (with ctx's error,
// the rest abandoned), nil when nothing had to be abandoned; it is
// idempotent.
func (c *Core) Close(ctx context.Context) error {
	return c.closer.Do(ctx, func() error {
		errs := []error{c.Sender.close(ctx)}
		if c.owner != nil {
			errs = append(errs, c.owner.Close(ctx), c.reaper.Close(ctx))
		}
		return errors.Join(errs...)
	})
}
