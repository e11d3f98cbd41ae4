package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/httpbody"
	"github.com/tempqueues/tempqueues/internal/payload"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// Attributes of the hand-written contenders' requests and replies.
const (
	replyToAttribute       = "ReplyTo"
	correlationIDAttribute = "CorrelationId"
)

// longPoll is the wait of every hand-written receive, as SQS recommends.
const longPoll = 20

func createQueue(ctx context.Context, client *sqs.Client, name string) (string, error) {
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.QueueUrl), nil
}

func deleteQueues(ctx context.Context, client *sqs.Client, urls ...string) error {
	var errs []error
	for _, u := range urls {
		if u == "" {
			continue
		}
		if _, err := client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkReply checks that the reply's body is the request's, byte for
// byte.
func checkReply(want string, got *string) error {
	if g := aws.ToString(got); g != want {
		return fmt.Errorf("reply %s to request %s", brief(strconv.Quote(g), 80), brief(strconv.Quote(want), 80))
	}
	return nil
}

// brief cuts s to about n bytes, saying how long it was.
func brief(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:n], len(s))
}

// tempQueues is requester.Requester against responder.Serve.
type tempQueues struct {
	*env
	client   *sqs.Client
	queueURL string
	req      *requester.Requester
	resp     *responder.Responder
	served   chan error
	// fewerCalls sets PreferFewerCalls on both sides, noCompression
	// DisableCompression.
	fewerCalls, noCompression bool
	// policy, when set, is the send policy of both sides.
	policy policyOf
}

// policyOf is a contender's send policy and the contender's name.
type policyOf struct {
	name string
	new  batch.NewPolicy
}

// policyClient is an SQS client that carries a send policy
// (batch.PolicyCarrier): the requester and responder made over it send
// by that policy instead of their own.
type policyClient struct {
	*sqs.Client
	policy batch.NewPolicy
}

func (c policyClient) SendPolicy() batch.NewPolicy { return c.policy }

// sqsClient is the client the requester and responder are made over:
// t.client, or a policyClient over it. A policyClient is no *sqs.Client,
// so the constructors leave it as it is: it gets the buffered request
// bodies they would install here.
func (t *tempQueues) sqsClient() sqsapi.Client {
	if t.policy.new == nil {
		return t.client
	}
	return policyClient{Client: sqs.New(t.client.Options(), httpbody.Buffer), policy: t.policy.new}
}

func (t *tempQueues) name() string {
	switch {
	case t.policy.name != "":
		return t.policy.name
	case t.fewerCalls:
		return TempQueuesFewerCalls
	case t.noCompression:
		return TempQueuesNoCompression
	}
	return TempQueues
}

// offloads: both sides have the store, for what does not fit.
func (t *tempQueues) offloads() bool { return true }

func (t *tempQueues) setup(ctx context.Context) error {
	var err error
	if t.queueURL, err = createQueue(ctx, t.client, t.queueName("tq-requests")); err != nil {
		return err
	}
	store := t.store(t.name())
	client := t.sqsClient()
	t.req, err = requester.New(client, func(o *requester.Options) {
		o.Prefix = t.prefix + "tq-"
		o.PreferFewerCalls = t.fewerCalls
		o.DisableCompression = t.noCompression
		o.PayloadStore = store
	})
	if err != nil {
		return err
	}
	t.resp, err = responder.New(client, func(o *responder.Options) {
		o.MaxConcurrency = t.cfg.ServerConcurrency
		o.PreferFewerCalls = t.fewerCalls
		o.AllowReplyTo = []string{t.prefix + "tq-"} // the requester's Prefix
		o.DisableCompression = t.noCompression
		o.PayloadStore = store
	})
	if err != nil {
		return err
	}
	t.served = make(chan error, 1)
	answer := responder.HandlerFunc(func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
		return &responder.Reply{Body: t.reply(req.Body())}, nil
	})
	go func() { t.served <- t.resp.Serve(context.Background(), t.queueURL, answer) }()
	// The first request creates the host queue; keep it out of the windows.
	_, err = t.call(ctx, 0)
	return err
}

// echo answers a request with its own body: the idle and stopping
// measurements' handler.
func echo(_ context.Context, req *responder.Request) (*responder.Reply, error) {
	return &responder.Reply{Body: req.Body()}, nil
}

func (t *tempQueues) call(ctx context.Context, caller int) (time.Duration, error) {
	start := time.Now()
	m, err := t.req.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(t.queueURL), MessageBody: aws.String(t.request(caller))})
	if err != nil {
		return 0, err
	}
	return time.Since(start), checkReply(t.body(caller), m.Body)
}

func (t *tempQueues) close(ctx context.Context) error {
	var errs []error
	if t.resp != nil {
		// An idle responder stops in about half a second (its long poll's
		// grace); an error means a handler had to be abandoned.
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		errs = append(errs, t.resp.Shutdown(sctx))
		cancel()
		if t.served != nil {
			errs = append(errs, <-t.served)
		}
	}
	if t.req != nil {
		errs = append(errs, t.req.Close(ctx))
	}
	errs = append(errs, deleteQueues(ctx, t.client, t.queueURL))
	return errors.Join(errs...)
}

// worker is the hand-written server of the queue-per-request and
// static-reply-queue contenders, as a careful Go programmer writes one:
// pollers long-poll loops that hand each message to a handler goroutine and
// receive again at once, at most concurrency handlers at a time (a poller
// waits for a free slot, so messages are not taken faster than they are
// handled); each handler sends the reply with one SendMessage to the
// request's ReplyTo queue, and its delete joins a deleter's batches. With a
// store it is an extended client's worker: a request that points to S3 is
// read from it as it is received, a reply over 256 KiB goes there
// (offloadLarge), and the request's object is deleted with the request.
type worker struct {
	client   *sqs.Client
	queueURL string
	reply    func(request string) string
	store    sqsapi.PayloadStore // nil: plain SQS
	cancel   context.CancelFunc
	pollers  sync.WaitGroup
	handlers sync.WaitGroup
	slots    chan struct{}
	deletes  *deleter
}

func startWorker(client *sqs.Client, queueURL string, pollers, concurrency int, reply func(string) string, store sqsapi.PayloadStore) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{client: client, queueURL: queueURL, reply: reply, store: store, cancel: cancel,
		slots: make(chan struct{}, max(concurrency, 1)), deletes: startDeleter(client, queueURL, store)}
	for range pollers {
		w.pollers.Add(1)
		go w.poll(ctx)
	}
	return w
}

func (w *worker) poll(ctx context.Context) {
	defer w.pollers.Done()
	for ctx.Err() == nil {
		out, err := w.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(w.queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: longPoll,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			if ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		for _, m := range out.Messages {
			if w.store != nil {
				// The extended clients read each pointer's object
				// within their receive, one after the other.
				if m, err = fetchLarge(ctx, w.store, m); err != nil {
					continue // redelivered after the visibility timeout
				}
			}
			select {
			case w.slots <- struct{}{}:
			case <-ctx.Done():
				return // the rest come back after their visibility timeout
			}
			w.handlers.Add(1)
			go func() {
				defer func() { <-w.slots; w.handlers.Done() }()
				w.handle(ctx, m)
			}()
		}
	}
}

func (w *worker) handle(ctx context.Context, m types.Message) {
	replyTo := aws.ToString(m.MessageAttributes[replyToAttribute].StringValue)
	attrs := map[string]types.MessageAttributeValue{correlationIDAttribute: m.MessageAttributes[correlationIDAttribute]}
	body := w.reply(aws.ToString(m.Body))
	if w.store != nil {
		var err error
		if body, err = offloadLarge(ctx, w.store, body, attrs); err != nil {
			return // redelivered after the visibility timeout
		}
	}
	if _, err := w.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(replyTo), MessageBody: aws.String(body), MessageAttributes: attrs,
	}); err != nil {
		return // redelivered after the visibility timeout
	}
	w.deletes.add(aws.ToString(m.ReceiptHandle))
}

func (w *worker) stop() {
	w.cancel()
	w.pollers.Wait()
	w.handlers.Wait()
	w.deletes.close()
}

// Batched deletes of the hand-written contenders: a DeleteMessageBatch as
// soon as ten receipt handles wait, or when the first has waited
// deleteLinger for company (well within the queues' 30 s visibility
// timeout, so a lingering delete never lets its message come back); up to
// deleteCalls batch calls at a time.
const (
	deleteLinger = time.Second
	deleteCalls  = 4
)

// deleter coalesces the deletes of one queue into DeleteMessageBatch
// calls. Nobody waits for a delete, so a short wait for company costs no
// latency; a failed delete is redelivered and deleted again, as in any
// consumer.
type deleter struct {
	client   *sqs.Client
	queueURL string
	store    sqsapi.PayloadStore // nil: plain SQS
	in       chan string
	done     chan struct{}
	calls    chan struct{} // a slot per batch call in flight
	inFlight sync.WaitGroup
}

func startDeleter(client *sqs.Client, queueURL string, store sqsapi.PayloadStore) *deleter {
	d := &deleter{client: client, queueURL: queueURL, store: store, in: make(chan string, 1024),
		done: make(chan struct{}), calls: make(chan struct{}, deleteCalls)}
	go d.run()
	return d
}

// add queues a delete; it blocks only while deleteCalls batch calls are in
// flight and 1024 more handles wait.
func (d *deleter) add(receiptHandle string) { d.in <- receiptHandle }

// close sends what is queued and returns when every batch call has.
func (d *deleter) close() {
	close(d.in)
	<-d.done
	d.inFlight.Wait()
}

func (d *deleter) run() {
	defer close(d.done)
	var (
		batch  []string
		linger *time.Timer
		expiry <-chan time.Time
	)
	flush := func() {
		if linger != nil {
			linger.Stop()
			linger, expiry = nil, nil
		}
		if len(batch) == 0 {
			return
		}
		d.calls <- struct{}{}
		d.inFlight.Add(1)
		go d.send(batch)
		batch = nil
	}
	for {
		select {
		case h, ok := <-d.in:
			if !ok {
				flush()
				return
			}
			batch = append(batch, h)
			if len(batch) == 1 {
				linger = time.NewTimer(deleteLinger)
				expiry = linger.C
			}
			if len(batch) == wire.MaxBatchEntries {
				flush()
			}
		case <-expiry:
			flush()
		}
	}
}

func (d *deleter) send(handles []string) {
	defer func() { <-d.calls; d.inFlight.Done() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	entries := make([]types.DeleteMessageBatchRequestEntry, len(handles))
	for i, h := range handles {
		// An extended client's batch delete first deletes, one after
		// the other, the objects its receipt handles name.
		if p, sqsHandle, ok := payload.SplitReceiptHandle(h); ok && d.store != nil {
			_ = d.store.Delete(ctx, p.Bucket, p.Key)
			h = sqsHandle
		}
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h)}
	}
	_, _ = d.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(d.queueURL), Entries: entries})
}

// queuePerRequest creates a real reply queue for every request and deletes
// it once the reply is in. The reply message is not deleted: deleting its
// queue discards it.
type queuePerRequest struct {
	*env
	client   *sqs.Client
	queueURL string
	worker   *worker
}

func (q *queuePerRequest) name() string { return QueuePerRequest }

func (q *queuePerRequest) setup(ctx context.Context) error {
	var err error
	if q.queueURL, err = createQueue(ctx, q.client, q.queueName("qpr-requests")); err != nil {
		return err
	}
	q.worker = startWorker(q.client, q.queueURL, q.cfg.ServerPollers, q.cfg.ServerConcurrency, q.reply, nil)
	return nil
}

// call's latency includes the DeleteQueue, as in code that writes defer
// client.DeleteQueue(...).
func (q *queuePerRequest) call(ctx context.Context, caller int) (time.Duration, error) {
	start := time.Now()
	err := q.roundTrip(ctx, caller)
	return time.Since(start), err
}

func (q *queuePerRequest) roundTrip(ctx context.Context, caller int) error {
	replyURL, err := createQueue(ctx, q.client, q.queueName("qpr"))
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = deleteQueues(dctx, q.client, replyURL)
	}()
	if w := q.cfg.CreateWait; w > 0 {
		t := time.NewTimer(w)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	id := uuid.NewString()
	if _, err := q.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(q.queueURL), MessageBody: aws.String(q.request(caller)),
		MessageAttributes: map[string]types.MessageAttributeValue{replyToAttribute: wire.StringAttribute(replyURL), correlationIDAttribute: wire.StringAttribute(id)},
	}); err != nil {
		return err
	}
	m, err := receiveOne(ctx, q.client, replyURL)
	if err != nil {
		return err
	}
	return checkReply(q.body(caller), m.Body)
}

func (q *queuePerRequest) close(ctx context.Context) error {
	if q.worker != nil {
		q.worker.stop()
	}
	return deleteQueues(ctx, q.client, q.queueURL)
}

// staticReply is one real reply queue for the requester process, as a
// careful Go programmer writes it: requests carry a correlation id; reply
// pollers long-poll the reply queue and hand each reply to its waiting
// caller, and the replies' deletes are batched (deleter). The pollers
// follow demand as the library's host pollers do: one per ten waiting
// callers, at most replyPollers, started by a call that finds too few and
// ended after a receive that finds too many, so an idle process polls
// nothing and one caller has one poll parked for its reply.
//
// With extended set it is the extended-client contender: the same, with
// what AWS's SQS Extended Client Libraries for Java and Python do at their
// defaults on both sides (a message over 256 KiB through S3, its object
// read within the receive and deleted with the message; offloadLarge,
// fetchLarge), and no compression.
type staticReply struct {
	*env
	extended           bool
	store              sqsapi.PayloadStore // the extended client's; nil otherwise
	client             *sqs.Client
	queueURL, replyURL string
	worker             *worker
	deletes            *deleter

	ctx    context.Context // the pollers'; cancelled by close
	cancel context.CancelFunc
	loop   sync.WaitGroup

	mu      sync.Mutex
	waiting map[string]chan *string
	pollers int
}

// replyPollers is the most reply pollers of a static reply queue, the
// requester's own default (hostq's MaxPollers).
const replyPollers = 4

func (s *staticReply) name() string {
	if s.extended {
		return ExtendedClient
	}
	return StaticReplyQueue
}

func (s *staticReply) offloads() bool { return s.extended }

func (s *staticReply) setup(ctx context.Context) error {
	var err error
	if s.queueURL, err = createQueue(ctx, s.client, s.queueName("static-requests")); err != nil {
		return err
	}
	if s.replyURL, err = createQueue(ctx, s.client, s.queueName("static-replies")); err != nil {
		return err
	}
	s.waiting = make(map[string]chan *string)
	if s.extended {
		s.store = s.env.store(s.name())
	}
	s.worker = startWorker(s.client, s.queueURL, s.cfg.ServerPollers, s.cfg.ServerConcurrency, s.reply, s.store)
	s.deletes = startDeleter(s.client, s.replyURL, s.store)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return nil
}

// wantPollers is how many reply pollers the waiting callers need; s.mu held.
func (s *staticReply) wantPollers() int {
	return min((len(s.waiting)+wire.MaxReceiveMessages-1)/wire.MaxReceiveMessages, replyPollers)
}

func (s *staticReply) receive() {
	defer s.loop.Done()
	for s.ctx.Err() == nil {
		out, err := s.client.ReceiveMessage(s.ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(s.replyURL), MaxNumberOfMessages: 10, WaitTimeSeconds: longPoll,
			MessageAttributeNames: []string{correlationIDAttribute, payload.SizeAttribute},
		})
		if err != nil {
			if s.ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if out != nil {
			for _, m := range out.Messages {
				if s.store != nil {
					var ferr error
					if m, ferr = fetchLarge(s.ctx, s.store, m); ferr != nil {
						continue // redelivered after the visibility timeout
					}
				}
				id := aws.ToString(m.MessageAttributes[correlationIDAttribute].StringValue)
				s.mu.Lock()
				ch := s.waiting[id]
				delete(s.waiting, id)
				s.mu.Unlock()
				if ch != nil {
					ch <- m.Body
				}
				s.deletes.add(aws.ToString(m.ReceiptHandle)) // late replies too
			}
		}
		s.mu.Lock()
		if s.pollers > s.wantPollers() {
			s.pollers--
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.pollers--
	s.mu.Unlock()
}

func (s *staticReply) call(ctx context.Context, caller int) (time.Duration, error) {
	start := time.Now()
	b := s.request(caller)
	id := uuid.NewString()
	ch := make(chan *string, 1)
	s.mu.Lock()
	s.waiting[id] = ch
	if s.pollers < s.wantPollers() && s.ctx.Err() == nil {
		s.pollers++
		s.loop.Add(1)
		go s.receive()
	}
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		delete(s.waiting, id)
		s.mu.Unlock()
	}
	attrs := map[string]types.MessageAttributeValue{replyToAttribute: wire.StringAttribute(s.replyURL), correlationIDAttribute: wire.StringAttribute(id)}
	if s.store != nil {
		var err error
		if b, err = offloadLarge(ctx, s.store, b, attrs); err != nil {
			forget()
			return 0, err
		}
	}
	if _, err := s.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(s.queueURL), MessageBody: aws.String(b), MessageAttributes: attrs,
	}); err != nil {
		forget()
		return 0, err
	}
	select {
	case got := <-ch:
		return time.Since(start), checkReply(s.body(caller), got)
	case <-ctx.Done():
		forget()
		return 0, ctx.Err()
	}
}

func (s *staticReply) close(ctx context.Context) error {
	if s.worker != nil {
		s.worker.stop()
	}
	if s.cancel != nil {
		s.mu.Lock()
		s.cancel() // under s.mu: no call starts a poller after it
		s.mu.Unlock()
		s.loop.Wait()
		s.deletes.close()
	}
	return deleteQueues(ctx, s.client, s.queueURL, s.replyURL)
}

// floor makes the four calls of a round trip in sequence, on a request and
// a reply queue of its own per caller, and deletes both messages off the
// clock.
type floor struct {
	*env
	client *sqs.Client
	pairs  [][2]string // per caller: request queue, reply queue
}

func (f *floor) name() string { return Floor }

func (f *floor) setup(ctx context.Context) error {
	n := 0
	for _, c := range f.cfg.Concurrency {
		n = max(n, c)
	}
	// A few at a time: hundreds of queues one after the other take long
	// at SQS-like latency, off the clock but on the sweep's.
	f.pairs = make([][2]string, n)
	return inParallel(ctx, n, setupCalls, func(i int) error {
		for j, kind := range []string{"floor-req", "floor-rep"} {
			u, err := createQueue(ctx, f.client, f.queueName(kind))
			if err != nil {
				return err
			}
			f.pairs[i][j] = u
		}
		return nil
	})
}

// setupCalls bounds the calls a contender's set-up or close makes at once.
const setupCalls = 16

// inParallel calls fn(0) to fn(n-1), at most par at a time, and returns
// their errors joined; it starts no new call once ctx is done.
func inParallel(ctx context.Context, n, par int, fn func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, par)
	)
	for i := range n {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// receiveOne long-polls queueURL until it returns a message.
func receiveOne(ctx context.Context, client *sqs.Client, queueURL string) (types.Message, error) {
	for {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), WaitTimeSeconds: longPoll})
		if err != nil {
			return types.Message{}, err
		}
		if len(out.Messages) > 0 {
			return out.Messages[0], nil
		}
	}
}

func (f *floor) call(ctx context.Context, caller int) (time.Duration, error) {
	p := f.pairs[caller]
	start := time.Now()
	if _, err := f.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(p[0]), MessageBody: aws.String(f.request(caller))}); err != nil {
		return 0, err
	}
	req, err := receiveOne(ctx, f.client, p[0])
	if err != nil {
		return 0, err
	}
	if _, err := f.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(p[1]), MessageBody: aws.String(f.reply(aws.ToString(req.Body)))}); err != nil {
		return 0, err
	}
	rep, err := receiveOne(ctx, f.client, p[1])
	if err != nil {
		return 0, err
	}
	lat := time.Since(start)
	if err := checkReply(f.body(caller), rep.Body); err != nil {
		return 0, err
	}
	for i, m := range []types.Message{req, rep} {
		if _, err := f.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(p[i]), ReceiptHandle: m.ReceiptHandle}); err != nil {
			return 0, err
		}
	}
	return lat, nil
}

func (f *floor) close(ctx context.Context) error {
	return inParallel(ctx, len(f.pairs), setupCalls, func(i int) error {
		return deleteQueues(ctx, f.client, f.pairs[i][0], f.pairs[i][1])
	})
}
