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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/virtualqueue"
)

// ErrClosed is returned by CreateQueue and HostQueue after Close.
var ErrClosed = sqsapi.ErrClosed

// HostAttributes are the queue attributes a host queue may be created with
// (the Java client's list). FIFO queues cannot host virtual queues.
var HostAttributes = []string{
	"DelaySeconds", "MaximumMessageSize", "MessageRetentionPeriod", "Policy", "ReceiveMessageWaitTimeSeconds",
	"RedrivePolicy", "VisibilityTimeout", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled",
}

// Options configure a Client.
type Options struct {
	// Prefix starts the name of every host queue; default
	// sqsapi.DefaultQueuePrefix. Host queue names are the prefix, a UUID, '-'
	// and a counter, at most 80 characters, so the prefix has at most 40.
	Prefix string
	// IdleQueueRetention is how long a host queue, and a virtual queue made
	// by CreateQueue, may stay idle before a reaper deletes it; default
	// sqsapi.DefaultIdleQueueRetention (300s), at least 1s.
	IdleQueueRetention time.Duration
	// DisableSweeping stops this process from taking part in the fleet's
	// sweeps of idle host queues; it still heartbeats its own.
	DisableSweeping bool
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// VirtualQueue configures the virtual-queue layer. Linger is on by
	// default: the host queues are the client's own.
	VirtualQueue []func(*virtualqueue.Options)
	// Reaper configures heartbeats and sweeps (Prefix, Logger and
	// DisableSweeping are set from the fields above first).
	Reaper []func(*reaper.Options)
}

// maxPrefix keeps "<prefix><uuid>-<n>" within 80 characters for up to 999
// host queues per client.
const maxPrefix = sqsapi.MaxQueueNameLength - 36 - 4

// Client is a drop-in SQS client whose CreateQueue makes temporary queues.
// Every other method is the embedded virtual-queue client's: calls on real
// queue URLs pass through, calls on virtual URLs are served locally.
type Client struct {
	*virtualqueue.Client
	raw    sqsapi.Client
	opts   Options
	reaper *reaper.Reaper
	id     string

	mu     sync.Mutex
	hosts  map[string]*hostQueue // by canonical attribute set
	n      int
	closed bool

	closeOnce sync.Once
	closeDone chan struct{}
	closeErr  error
}

type hostQueue struct {
	ready chan struct{}
	url   string
	err   error
}

// New returns a Client over client and starts its reaper (heartbeats and,
// unless disabled, the fleet's sweeps). It validates the options and makes
// no API call itself; host queues are created on first use.
func New(client sqsapi.Client, optFns ...func(*Options)) (*Client, error) {
	const op = "tempqueue.New"
	if client == nil {
		return nil, sqsapi.Invalid(op, "client", "nil")
	}
	opts := Options{Prefix: sqsapi.DefaultQueuePrefix, IdleQueueRetention: sqsapi.DefaultIdleQueueRetention}
	for _, fn := range optFns {
		fn(&opts)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Prefix == "" || len(opts.Prefix) > maxPrefix || !sqsapi.ValidQueueName(opts.Prefix) || strings.HasSuffix(opts.Prefix, ".fifo") {
		return nil, sqsapi.Invalid(op, "Prefix", "%q must be 1 to %d characters of A-Z a-z 0-9 - _ (host queue names add a UUID and a counter and must stay within 80)", opts.Prefix, maxPrefix)
	}
	if opts.IdleQueueRetention < sqsapi.MinIdleQueueRetention || opts.IdleQueueRetention%time.Second != 0 {
		return nil, sqsapi.Invalid(op, "IdleQueueRetention", "%v must be whole seconds, at least %v", opts.IdleQueueRetention, sqsapi.MinIdleQueueRetention)
	}
	c := &Client{raw: client, opts: opts, id: uuid.NewString(), hosts: make(map[string]*hostQueue), closeDone: make(chan struct{})}
	r, err := reaper.New(client, append([]func(*reaper.Options){func(o *reaper.Options) {
		o.Prefix = opts.Prefix
		o.Logger = opts.Logger
		o.DisableSweeping = opts.DisableSweeping
		o.OnQueueGone = func(url string, _ error) { c.HostGone(url) }
	}}, opts.Reaper...)...)
	if err != nil {
		return nil, err
	}
	if err := r.Start(); err != nil {
		return nil, err
	}
	c.reaper = r
	// Host queues are this client's own: a lingering poller takes nobody
	// else's messages.
	c.Client = virtualqueue.New(client, append([]func(*virtualqueue.Options){func(o *virtualqueue.Options) {
		o.Logger = opts.Logger
		o.Linger = true
	}}, opts.VirtualQueue...)...)
	return c, nil
}

// Reaper returns the client's reaper, for its statistics or an immediate
// Sweep.
func (c *Client) Reaper() *reaper.Reaper { return c.reaper }

// CheckHostAttributes reports an *sqsapi.InvalidInputError when attrs holds
// an attribute a host queue cannot be created with (see HostAttributes).
func CheckHostAttributes(attrs map[string]string) error {
	_, err := canonical(attrs)
	return err
}

// canonical returns a key identifying an attribute set, after validation.
func canonical(attrs map[string]string) (string, error) {
	keys := slices.Sorted(maps.Keys(attrs))
	var b strings.Builder
	for _, k := range keys {
		if !slices.Contains(HostAttributes, k) {
			return "", sqsapi.Invalid("CreateQueue", "Attributes", "temporary queues take no attribute %q (allowed: %s)", k, strings.Join(HostAttributes, ", "))
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(attrs[k])
		b.WriteByte(0)
	}
	return b.String(), nil
}

// HostQueue returns the URL of this client's host queue for the attribute
// set attrs, creating it on first use: one CreateQueue call, with the
// reaper's tags, after which it is heartbeated until Close.
func (c *Client) HostQueue(ctx context.Context, attrs map[string]string) (string, error) {
	key, err := canonical(attrs)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return "", ErrClosed
	}
	h := c.hosts[key]
	if h != nil {
		c.mu.Unlock()
		select {
		case <-h.ready:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if h.err != nil {
			return c.HostQueue(ctx, attrs) // the creator's failure removed it: try anew
		}
		return h.url, nil
	}
	h = &hostQueue{ready: make(chan struct{})}
	c.hosts[key] = h
	n := c.n
	c.n++
	c.mu.Unlock()

	h.url, h.err = c.createHost(ctx, n, attrs)
	c.mu.Lock()
	closed := c.closed
	if h.err != nil || closed {
		delete(c.hosts, key)
	}
	c.mu.Unlock()
	if h.err == nil && closed {
		// Close ran while the queue was being created and did not see it.
		c.reaper.Remove(h.url)
		c.deleteOrphanHost(ctx, h.url)
		h.url, h.err = "", ErrClosed
	}
	close(h.ready)
	return h.url, h.err
}

// deleteOrphanHost deletes a host queue just created that nobody will use or
// heartbeat, even when ctx has ended, within a bound of its own.
func (c *Client) deleteOrphanHost(ctx context.Context, url string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, _ = c.raw.DeleteQueue(dctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
}

func (c *Client) createHost(ctx context.Context, n int, attrs map[string]string) (string, error) {
	name := c.opts.Prefix + c.id + "-" + strconv.Itoa(n)
	if len(name) > sqsapi.MaxQueueNameLength {
		return "", sqsapi.Invalid("CreateQueue", "Prefix", "host queue name %q exceeds %d characters", name, sqsapi.MaxQueueNameLength)
	}
	now := time.Now()
	out, err := c.raw.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(name),
		Attributes: maps.Clone(attrs),
		Tags:       reaper.QueueTags(c.opts.IdleQueueRetention, now),
	})
	if err != nil {
		return "", err
	}
	url := aws.ToString(out.QueueUrl)
	if err := c.reaper.AddTagged(url, c.opts.IdleQueueRetention, now); err != nil {
		// Typically Close ran meanwhile: a queue nobody heartbeats or
		// deletes must not outlive this call.
		c.deleteOrphanHost(ctx, url)
		if errors.Is(err, reaper.ErrClosed) {
			err = ErrClosed
		}
		return "", err
	}
	c.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "tempqueue: created host queue", slog.String("queue_url", url))
	return url, nil
}

// HostGone forgets a host queue found deleted (for example by an operator),
// so the next use creates a new one, and drops the virtual queues it carried
// (virtualqueue.Client.ForgetHost): their receivers fail with
// QueueDoesNotExist and the host's goroutines stop. The requester and the
// reaper call it.
func (c *Client) HostGone(url string) {
	c.mu.Lock()
	for k, h := range c.hosts {
		select {
		case <-h.ready:
			if h.url == url {
				delete(c.hosts, k)
			}
		default:
		}
	}
	c.mu.Unlock()
	c.reaper.Remove(url)
	c.ForgetHost(url)
	c.opts.Logger.LogAttrs(context.Background(), slog.LevelWarn, "tempqueue: host queue was deleted; a new one will be created", slog.String("queue_url", url))
}

// HostQueueURLs returns the URLs of the client's live host queues.
func (c *Client) HostQueueURLs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var urls []string
	for _, h := range c.hosts {
		select {
		case <-h.ready:
			if h.err == nil {
				urls = append(urls, h.url)
			}
		default:
		}
	}
	slices.Sort(urls)
	return urls
}

// CreateQueue makes a temporary queue: a virtual queue named in.QueueName on
// this client's host queue for in.Attributes (created on first use), which
// expires after IdleQueueRetention of idleness (or the
// IdleQueueRetentionPeriodSeconds attribute, when given). With the
// HostQueueUrl attribute it makes a virtual queue on that host instead, as
// virtualqueue.Client does.
func (c *Client) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	if in == nil {
		return nil, sqsapi.Invalid("CreateQueue", "input", "nil")
	}
	if _, ok := in.Attributes[sqsapi.HostQueueURLAttribute]; ok {
		return c.Client.CreateQueue(ctx, in, optFns...)
	}
	hostAttrs := maps.Clone(in.Attributes)
	retention := strconv.Itoa(int(c.opts.IdleQueueRetention / time.Second))
	if r, ok := hostAttrs[sqsapi.IdleQueueRetentionPeriodAttribute]; ok {
		if n, err := strconv.Atoi(r); err != nil || n < 1 {
			return nil, sqsapi.Invalid("CreateQueue", sqsapi.IdleQueueRetentionPeriodAttribute, "%q must be a whole number of seconds, at least 1", r)
		}
		retention = r
		delete(hostAttrs, sqsapi.IdleQueueRetentionPeriodAttribute)
	}
	if !sqsapi.ValidQueueName(aws.ToString(in.QueueName)) {
		return nil, sqsapi.Invalid("CreateQueue", "QueueName", "%q must be 1-80 characters of A-Z a-z 0-9 - _", aws.ToString(in.QueueName))
	}
	host, err := c.HostQueue(ctx, hostAttrs)
	if err != nil {
		return nil, err
	}
	return c.Client.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: in.QueueName,
		Tags:      in.Tags,
		Attributes: map[string]string{
			sqsapi.HostQueueURLAttribute:             host,
			sqsapi.IdleQueueRetentionPeriodAttribute: retention,
		},
	}, optFns...)
}

// Close closes the virtual-queue layer (waking receivers, releasing buffered
// messages, flushing deletes), stops the reaper, and deletes this client's
// host queues. It is idempotent: a later call waits for the first (or ctx)
// and returns its result.
func (c *Client) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		defer close(c.closeDone)
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		urls := c.HostQueueURLs()
		errs := []error{c.Client.Close(ctx)}
		for _, u := range urls {
			c.reaper.Remove(u)
		}
		errs = append(errs, c.reaper.Close(ctx))
		for _, u := range urls {
			if _, err := c.raw.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil && !sqsapi.IsQueueDoesNotExist(err) {
				errs = append(errs, err)
			}
		}
		c.closeErr = errors.Join(errs...)
	})
	select {
	case <-c.closeDone:
		return c.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}
