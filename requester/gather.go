package requester

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/hostq"
	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Gathered is one reply of a scatter-gather and where it came from.
type Gathered struct {
	// Origin is the request queue the reply answers from: the queue the
	// request was sent to (ScatterGather), or the one the responder
	// received it from, as its TempQueues.Origin attribute says
	// (PublishGather; "" from a responder that does not say).
	Origin  string
	Message *types.Message
}

// ErrIncomplete is matched by the error of a scatter-gather that ended
// with fewer replies than it wanted: at its deadline, or when the other
// requests failed. The replies it got are returned with it; the error
// says how many are missing, also matches ErrTimeout (and
// context.DeadlineExceeded) when the deadline ended it, and wraps the
// failures of the requests that got no reply.
var ErrIncomplete = errors.New("requester: fewer replies than wanted")

// incompleteError is the error of a scatter-gather that ended short
// (ErrIncomplete).
type incompleteError struct {
	wanted, got int
	err         error // why the missing replies are missing
}

func (e *incompleteError) Error() string {
	return fmt.Sprintf("requester: gathered %d of %d replies, %d missing: %v", e.got, e.wanted, e.wanted-e.got, e.err)
}

// Unwrap returns the failures of the requests that got no reply.
func (e *incompleteError) Unwrap() error { return e.err }

// Is makes errors.Is match ErrIncomplete.
func (e *incompleteError) Is(target error) bool { return target == ErrIncomplete }

// ScatterGather sends the request in to every queue of queueURLs (in's
// QueueUrl is ignored; each copy is a request of its own, with its own
// request id and reply route) and gathers the replies until want of them
// arrived (want 0: one per queue) or ctx ends (Options.Timeout applies
// when it has no deadline). It returns the replies in order of arrival,
// each with the queue it answers from; with fewer than want, it returns
// those with an error matching ErrIncomplete. Replies arriving later are late replies.
// Every copy is checked before anything is sent.
func (r *Requester) ScatterGather(ctx context.Context, queueURLs []string, in *sqs.SendMessageInput, want int) ([]Gathered, error) {
	const op = "requester.ScatterGather"
	if want < 0 || want > len(queueURLs) {
		return nil, wire.Invalid(op, "want", "%d is not between 0 and the %d queues", want, len(queueURLs))
	}
	if len(queueURLs) == 0 {
		return nil, wire.Invalid(op, "queueURLs", "no queue")
	}
	if want == 0 {
		want = len(queueURLs)
	}
	if in == nil {
		return nil, wire.Invalid(op, "input", "nil")
	}
	reqs := make([]sqs.SendMessageInput, len(queueURLs))
	for i, u := range queueURLs {
		reqs[i] = *in
		reqs[i].QueueUrl = aws.String(u)
		if _, _, _, _, err := r.checkRequest(op, &reqs[i], compressIfNeeded); err != nil {
			return nil, err
		}
	}
	gctx, cancel := r.gatherContext(ctx)
	defer cancel()

	type result struct {
		origin string
		msg    *types.Message
		err    error
	}
	results := make(chan result, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func() { // one per queue, joined below: sends go out together
			defer wg.Done()
			msg, err := r.SendMessageAndGetResponse(gctx, &reqs[i])
			results <- result{origin: queueURLs[i], msg: msg, err: err}
		}()
	}
	var (
		got  []Gathered
		errs []error
	)
	for range reqs {
		res := <-results
		if res.err != nil {
			errs = append(errs, res.err)
			continue
		}
		got = append(got, Gathered{Origin: res.origin, Message: res.msg})
		if len(got) == want {
			break
		}
	}
	cancel() // the requests still waiting stop; their replies come late
	wg.Wait()
	if len(got) < want {
		return got, &incompleteError{wanted: want, got: len(got), err: errors.Join(errs...)}
	}
	return got, nil
}

// gatherContext is ctx with Options.Timeout when it has no deadline.
func (r *Requester) gatherContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); !ok && r.opts.Timeout > 0 {
		return context.WithTimeout(ctx, r.opts.Timeout)
	}
	return context.WithCancel(ctx)
}

// Publisher publishes a message to a topic that fans it out to request
// queues: SNS's Publish behind one method, so that the core module does not
// depend on SNS. An adapter over an SNS client converts the attributes to
// SNS's type. The topic's SQS subscriptions need raw message delivery, so
// that the message attributes (ResponseQueueUrl above all) arrive as SQS
// message attributes.
type Publisher interface {
	Publish(ctx context.Context, body string, attributes map[string]types.MessageAttributeValue) error
}

// PublishGather publishes the request in through p (in's QueueUrl is
// ignored) and gathers replies until want of them arrived (want > 0: the
// requester cannot know how many queues subscribe) or ctx ends
// (Options.Timeout applies when it has no deadline). Every responder
// replies to the same virtual reply queue; the request carries
// TempQueues.Origin, so Serve adds the request queue's URL to its reply,
// and a second reply from one origin (a redelivered request) is dropped.
// With fewer than want replies, it returns those with an
// error matching ErrIncomplete; replies arriving later are late replies.
func (r *Requester) PublishGather(ctx context.Context, p Publisher, in *sqs.SendMessageInput, want int) ([]Gathered, error) {
	const op = "requester.PublishGather"
	switch {
	case p == nil:
		return nil, wire.Invalid(op, "publisher", "nil")
	case want <= 0:
		return nil, wire.Invalid(op, "want", "%d; must be positive", want)
	case in == nil:
		return nil, wire.Invalid(op, "input", "nil")
	case in.DelaySeconds != 0:
		return nil, wire.Invalid(op, "DelaySeconds", "a topic has no per-message delay")
	}
	probe := *in
	probe.QueueUrl = aws.String("topic") // checked as a plain queue
	requestID, attrs, _, _, err := r.checkRequest(op, &probe, noCompression, sqsapi.OriginAttribute)
	if err != nil {
		return nil, err
	}
	if r.isClosed() {
		return nil, sqsapi.ErrClosed
	}
	g := &gathering{r: r, want: want, seen: make(map[string]bool), wake: make(chan struct{}, 1)}
	replyName := uuid.NewString()
	if requestID == "" {
		requestID = replyName
	}
	gctx, cancel := r.gatherContext(ctx)
	defer cancel()
	g.ctx = gctx // before the host may route a reply to g
	host, err := r.expectWith(ctx, func(h *hostq.Host) error { return h.ExpectMany(replyName, g.onReply) })
	if err != nil {
		return nil, r.closedErr(err)
	}
	defer host.Unexpect(replyName)
	attrs[sqsapi.ResponseQueueURLAttribute] = wire.StringAttribute(wire.VirtualQueueURL(host.URL(), replyName))
	attrs[sqsapi.RequestIDAttribute] = wire.StringAttribute(requestID)
	attrs[sqsapi.OriginAttribute] = wire.StringAttribute("1")
	if !r.opts.DisableCompression {
		payload.Advertise(attrs, in.MessageBody, "topic", payload.Codec)
	}
	sentAt := time.Now()
	if err := p.Publish(gctx, aws.ToString(in.MessageBody), attrs); err != nil {
		r.failed.Add(1)
		return nil, fmt.Errorf("requester.PublishGather: publishing request %s: %w", requestID, err)
	}
	for {
		g.mu.Lock()
		got, failure := g.got, g.err
		g.mu.Unlock()
		switch {
		case len(got) >= want:
			return got[:want], nil
		case failure != nil:
			return got, &incompleteError{wanted: want, got: len(got), err: r.closedErr(failure)}
		}
		select {
		case <-g.wake:
		case <-gctx.Done():
			g.mu.Lock()
			got, bad := g.got, g.bad
			g.mu.Unlock()
			if len(got) >= want {
				return got[:want], nil
			}
			err := gctx.Err()
			if errors.Is(err, context.DeadlineExceeded) {
				r.timedOut.Add(1)
				err = &timeoutError{requestID: requestID, queueURL: "(topic)", waited: time.Since(sentAt)}
			}
			for _, b := range bad {
				err = errors.Join(err, badResponse(requestID, b))
			}
			return got, &incompleteError{wanted: want, got: len(got), err: err}
		}
	}
}

// gathering collects the replies of a PublishGather.
type gathering struct {
	r    *Requester
	ctx  context.Context // bounds the reads of replies from Options.PayloadStore
	want int
	wake chan struct{}

	mu   sync.Mutex
	seen map[string]bool // origins, or message ids of replies without one
	got  []Gathered
	err  error   // the host failed: no more replies come
	bad  []error // replies that could not be read (payload.Decode)
}

// onReply takes a reply on a host poller and reports whether more are
// wanted.
func (g *gathering) onReply(m types.Message, err error) bool {
	if _, ok := payload.ParsePointer(m); ok && err == nil {
		// Its body is in Options.PayloadStore: read off the host's
		// poller, and its object deleted, read or not.
		g.r.background(func() {
			out, p, _, ferr := payload.Fetch(g.ctx, g.r.opts.PayloadStore, m)
			defer g.r.dropObject(&p) // after the reply is gathered
			if ferr != nil {
				g.mu.Lock()
				g.bad = append(g.bad, ferr)
				g.mu.Unlock()
				g.signal()
				return
			}
			g.onReply(out, nil)
		})
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.got) < g.want
	}
	g.mu.Lock()
	defer func() {
		g.mu.Unlock()
		g.signal()
	}()
	if err != nil {
		g.err = err
		return false
	}
	m, _, err = payload.Decode(m)
	if err != nil {
		// One responder's reply: the others' may still come.
		g.bad = append(g.bad, err)
		return len(g.got) < g.want
	}
	origin := ""
	if v, ok := m.MessageAttributes[sqsapi.OriginAttribute]; ok {
		origin = aws.ToString(v.StringValue)
	}
	key := "origin:" + origin
	if origin == "" {
		key = "message:" + aws.ToString(m.MessageId)
	}
	if !g.seen[key] && len(g.got) < g.want {
		g.seen[key] = true
		g.got = append(g.got, Gathered{Origin: origin, Message: &m})
	}
	return len(g.got) < g.want
}

// signal wakes the gather's caller.
func (g *gathering) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}
