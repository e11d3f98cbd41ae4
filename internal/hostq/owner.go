package hostq

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/callbound"
	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/lifecycle"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// hostAttributes are the queue attributes a host queue may be created with:
// the Java client's list, and the FIFO attributes (fifo.go), which the Java
// client rejects.
var hostAttributes = []string{
	"DelaySeconds", "MaximumMessageSize", "MessageRetentionPeriod", "Policy", "ReceiveMessageWaitTimeSeconds",
	"RedrivePolicy", "VisibilityTimeout", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled",
	attrFifoQueue, "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit",
}

// maxPrefix keeps "<prefix><uuid>-<n>" within 80 characters for up to 999
// host queues per owner.
const maxPrefix = wire.MaxQueueNameLength - 36 - 4

// Heartbeats keeps owned host queues alive for the fleet's sweepers. A
// *reap.Reaper is one; internal/core creates it (telling Owner.Gone of a
// queue it finds deleted) and closes it after the Owner.
type Heartbeats interface {
	// Tags returns the heartbeat tags to create a queue with, for the
	// configured retention (a fleet too large for it gets a multiple).
	Tags(ctx context.Context, retention time.Duration) map[string]string
	// AddTagged starts heartbeating a queue created with those tags.
	AddTagged(queueURL string, retention time.Duration, tags map[string]string) error
	// Remove stops heartbeating a queue.
	Remove(queueURL string)
}

// OwnerOptions configure an Owner.
type OwnerOptions struct {
	Prefix     string        // host queue names start with it
	Retention  time.Duration // heartbeat retention tag
	Heartbeats Heartbeats    // required
	Logger     *slog.Logger
	// Tags are the user's tags, added to the heartbeat tags in each host
	// queue's CreateQueue (see CheckTags).
	Tags map[string]string
	// Host, when set, makes Open available: it configures the runtime Host
	// opened over each owned queue (defaults set by NewOwner).
	Host *Options
	// OnGone is called, from a library goroutine, when an owned host queue
	// is found deleted; the next use creates a new one.
	OnGone func(url string)
	// Calls, if set, counts the calls made for the host queues and their
	// runtime Hosts.
	Calls *callcount.Counter
}

// CheckOwner validates the options that shape host queue names and tags.
func CheckOwner(op, prefix string, retention time.Duration) error {
	if prefix == "" || len(prefix) > maxPrefix || !wire.ValidQueueName(prefix) || strings.HasSuffix(prefix, ".fifo") {
		return wire.Invalid(op, "Prefix", "%q must be 1 to %d characters of A-Z a-z 0-9 - _ (host queue names add a UUID and a counter and must stay within 80)", prefix, maxPrefix)
	}
	if retention < wire.MinIdleQueueRetention || retention%time.Second != 0 {
		return wire.Invalid(op, "IdleQueueRetention", "%v must be whole seconds, at least %v", retention, wire.MinIdleQueueRetention)
	}
	return nil
}

// CheckTags validates the user's tags for host queues against SQS's tag
// rules, leaving room for the heartbeat tags and rejecting their keys: the
// sweepers of the fleet recognise host queues by those tags alone, so a
// user's tag must neither replace nor imitate them.
func CheckTags(op string, tags map[string]string) error {
	return wire.CheckQueueTags(op, "HostQueueTags", tags, sqsapi.RetentionTag, sqsapi.HeartbeatTag)
}

// CheckAttributes reports an *sqsapi.InvalidInputError when attrs holds an
// attribute a host queue cannot be created with.
func CheckAttributes(op string, attrs map[string]string) error {
	_, err := canonical(op, attrs)
	return err
}

// canonical returns a key identifying an attribute set, after validation.
func canonical(op string, attrs map[string]string) (string, error) {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		if !slices.Contains(hostAttributes, k) {
			return "", wire.Invalid(op, "Attributes", "temporary queues take no attribute %q (allowed: %s)", k, strings.Join(hostAttributes, ", "))
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(attrs[k])
		b.WriteByte(0)
	}
	if err := checkFIFOAttributes(op, attrs); err != nil {
		return "", err
	}
	return b.String(), nil
}

// Owner is the lifecycle of the host queues a process creates for itself,
// one per distinct attribute set: it creates each with the heartbeat tags
// and OwnerOptions.Tags (named <prefix><uuid>-<n>, the Java client's
// format), heartbeats it through OwnerOptions.Heartbeats, forgets it when
// found deleted so the next use creates a new one, and deletes it on Close.
// Attributes with FifoQueue true make a FIFO host queue, named with
// ".fifo" added. A crashed process's
// queues are left to the fleet's sweeps.
type Owner struct {
	raw  sqsapi.Client
	opts OwnerOptions
	id   string
	hb   Heartbeats
	n    atomic.Int64 // host queues created, for their names

	hosts   Set[*owned] // by canonical attribute set
	mu      sync.Mutex
	retired []*Host // opened hosts found gone, closed by Close
	// names holds, per attribute set, the name whose CreateQueue failed:
	// the server may have created the queue and lost only the response,
	// so the next attempt asks for the same name (CreateQueue is
	// idempotent for equal attributes) instead of leaving it behind.
	names map[string]string
	// maybe are names whose creation may have succeeded unseen; Close
	// looks them up and deletes what exists.
	maybe map[string]bool

	closer lifecycle.Once
}

type owned struct {
	url  string
	host *Host // nil unless OwnerOptions.Host is set
}

// NewOwner validates opts. It makes no API call.
func NewOwner(op string, client sqsapi.Client, opts OwnerOptions) (*Owner, error) {
	if err := CheckOwner(op, opts.Prefix, opts.Retention); err != nil {
		return nil, err
	}
	if err := CheckTags(op, opts.Tags); err != nil {
		return nil, err
	}
	if opts.Heartbeats == nil {
		return nil, wire.Invalid(op, "Heartbeats", "nil")
	}
	// A copy: the caller's map may change after NewOwner returns.
	opts.Tags = maps.Clone(opts.Tags)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Host != nil {
		opts.Host.SetDefaults()
	}
	raw := client
	if opts.Calls != nil {
		raw = CountCalls(client, opts.Calls)
	}
	o := &Owner{raw: raw, opts: opts, hb: opts.Heartbeats, id: uuid.NewString()}
	if opts.Host != nil {
		next := opts.Host.OnGone
		opts.Host.OnGone = func(h *Host) {
			o.Gone(h.URL())
			if next != nil {
				next(h)
			}
		}
	}
	return o, nil
}

// URL returns the URL of the owned host queue for attrs, creating it on
// first use.
func (o *Owner) URL(ctx context.Context, attrs map[string]string) (string, error) {
	ow, err := o.get(ctx, attrs)
	if err != nil {
		return "", err
	}
	return ow.url, nil
}

// Open returns the runtime Host over the owned host queue for attrs,
// creating and opening it on first use. OwnerOptions.Host must be set.
func (o *Owner) Open(ctx context.Context, attrs map[string]string) (*Host, error) {
	ow, err := o.get(ctx, attrs)
	if err != nil {
		return nil, err
	}
	return ow.host, nil
}

func (o *Owner) get(ctx context.Context, attrs map[string]string) (*owned, error) {
	// Checked by the callers (requester.New, tempqueue.CreateQueue)
	// under their own names.
	key, err := canonical("", attrs)
	if err != nil {
		return nil, err
	}
	if err := CheckFIFOPrefix("", o.opts.Prefix, attrs); err != nil {
		return nil, err
	}
	return o.hosts.Get(ctx, key, func() (*owned, error) {
		url, h, err := o.create(ctx, key, attrs)
		return &owned{url: url, host: h}, err
	}, func(ow *owned) {
		// Close ran meanwhile: nobody will use or heartbeat this queue.
		o.hb.Remove(ow.url)
		if ow.host != nil {
			_ = ow.host.Close(context.WithoutCancel(ctx))
		}
		o.deleteQueue(ctx, ow.url)
	})
}

// bounded runs call under ctx bounded by callbound.Timeout.
func (o *Owner) bounded(ctx context.Context, call func(context.Context) error) error {
	ctx, cancel := callbound.Context(ctx, 0)
	defer cancel()
	return call(ctx)
}

// deleteQueue deletes a host queue nobody will use or heartbeat, even when
// ctx has ended, within a bound of its own.
func (o *Owner) deleteQueue(ctx context.Context, url string) {
	dctx, cancel := callbound.Context(context.WithoutCancel(ctx), 0)
	defer cancel()
	_, _ = o.raw.DeleteQueue(dctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
}

// name returns the host queue name for the attribute set key: the one
// whose creation failed last, or a new one.
func (o *Owner) name(key string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n, ok := o.names[key]; ok {
		return n
	}
	return o.opts.Prefix + o.id + "-" + strconv.Itoa(int(o.n.Add(1)-1))
}

// created records the outcome of a CreateQueue of name for key: failed
// (the queue may exist), or done.
func (o *Owner) created(key, name string, failed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.names == nil {
		o.names, o.maybe = make(map[string]string), make(map[string]bool)
	}
	if failed {
		o.names[key], o.maybe[name] = name, true
		return
	}
	delete(o.names, key)
	delete(o.maybe, name)
}

func (o *Owner) create(ctx context.Context, key string, attrs map[string]string) (string, *Host, error) {
	name := o.name(key)
	if wantsFIFO(attrs) && !strings.HasSuffix(name, ".fifo") {
		name += ".fifo" // SQS's rule for FIFO queue names
	}
	// The user's tags and the heartbeat tags in one call: a host queue is
	// never seen without either. Later heartbeats (TagQueue) merge, so the
	// user's tags stay for the queue's life.
	// CheckTags kept the keys disjoint; the heartbeat tags go last anyway.
	tags := make(map[string]string, len(o.opts.Tags)+2)
	maps.Copy(tags, o.opts.Tags)
	maps.Copy(tags, o.hb.Tags(ctx, o.opts.Retention))
	cctx, cancel := callbound.Context(ctx, 0)
	defer cancel()
	out, err := o.raw.CreateQueue(cctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(name),
		Attributes: maps.Clone(attrs),
		Tags:       tags,
	})
	o.created(key, name, err != nil)
	if err != nil {
		return "", nil, err
	}
	url := aws.ToString(out.QueueUrl)
	if err := o.hb.AddTagged(url, o.opts.Retention, tags); err != nil {
		// Typically Close ran meanwhile: a queue nobody heartbeats or
		// deletes must not outlive this call.
		o.deleteQueue(ctx, url)
		if errors.Is(err, sqsapi.ErrClosed) {
			err = sqsapi.ErrClosed
		}
		return "", nil, err
	}
	var h *Host
	if o.opts.Host != nil {
		if h, err = Open(ctx, o.raw, url, o.opts.Host); err != nil {
			o.hb.Remove(url)
			o.deleteQueue(ctx, url)
			return "", nil, err
		}
	}
	o.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "hostq: created host queue", slog.String("queue_url", url))
	return url, h, nil
}

// Gone forgets an owned host queue found deleted (by a heartbeat, a receive
// or an operator), so the next use creates a new one, ends its runtime Host
// and calls OwnerOptions.OnGone. It makes no API call.
func (o *Owner) Gone(url string) {
	gone := o.hosts.Remove(func(ow *owned) bool { return ow.url == url })
	if len(gone) == 0 {
		return
	}
	o.hb.Remove(url)
	for _, ow := range gone {
		if ow.host != nil {
			o.mu.Lock()
			o.retired = append(o.retired, ow.host)
			o.mu.Unlock()
			ow.host.Gone()
		}
	}
	o.opts.Logger.LogAttrs(context.Background(), slog.LevelWarn, "hostq: owned host queue was deleted; a new one will be created", slog.String("queue_url", url))
	if o.opts.OnGone != nil {
		o.opts.OnGone(url)
	}
}

// Close closes the runtime Hosts (failing their waiting calls, releasing
// held messages, flushing deletes), stops their heartbeats and deletes the
// owned host queues. It returns when done or when ctx ends, with ctx's error if
// work was abandoned, and is idempotent.
func (o *Owner) Close(ctx context.Context) error {
	return o.closer.Do(ctx, func() error {
		live := o.hosts.Close()
		o.mu.Lock()
		hosts := slices.Clone(o.retired)
		o.mu.Unlock()
		for _, ow := range live {
			if ow.host != nil {
				hosts = append(hosts, ow.host)
			}
		}
		errs := []error{CloseAll(ctx, hosts)}
		for _, ow := range live {
			o.hb.Remove(ow.url)
			if err := o.bounded(ctx, func(ctx context.Context) error {
				_, err := o.raw.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(ow.url)})
				return err
			}); err != nil && !awserr.IsQueueDoesNotExist(err) {
				errs = append(errs, err)
			}
		}
		return errors.Join(append(errs, o.deleteMaybe(ctx))...)
	})
}

// deleteMaybe deletes the queues whose CreateQueue failed but which the
// server may have created: one GetQueueUrl each, and a DeleteQueue for
// those that exist.
func (o *Owner) deleteMaybe(ctx context.Context) error {
	o.mu.Lock()
	names := slices.Sorted(maps.Keys(o.maybe))
	o.mu.Unlock()
	var errs []error
	for _, name := range names {
		err := o.bounded(ctx, func(ctx context.Context) error {
			out, err := o.raw.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
			if err == nil {
				_, err = o.raw.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
			}
			return err
		})
		if err != nil && !awserr.IsQueueDoesNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
