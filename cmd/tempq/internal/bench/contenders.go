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

	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
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

func body(caller int) string { return "ping " + strconv.Itoa(caller) }

func checkReply(want string, got *string) error {
	if aws.ToString(got) != want {
		return fmt.Errorf("reply %q to request %q", aws.ToString(got), want)
	}
	return nil
}

// tempQueues is requester.Requester against responder.Serve.
type tempQueues struct {
	*env
	client   *sqs.Client
	queueURL string
	req      *requester.Requester
	resp     *responder.Responder
	served   chan error
}

func (t *tempQueues) name() string { return TempQueues }

func (t *tempQueues) setup(ctx context.Context) error {
	var err error
	if t.queueURL, err = createQueue(ctx, t.client, t.queueName("tq-requests")); err != nil {
		return err
	}
	t.req, err = requester.New(t.client, func(o *requester.Options) { o.Prefix = t.prefix + "tq-" })
	if err != nil {
		return err
	}
	t.resp, err = responder.New(t.client, func(o *responder.Options) {
		o.MaxConcurrency = t.cfg.ServerConcurrency
		o.MaxPollers = t.cfg.ServerPollers
	})
	if err != nil {
		return err
	}
	t.served = make(chan error, 1)
	go func() { t.served <- t.resp.Serve(context.Background(), t.queueURL, responder.HandlerFunc(echo)) }()
	// The first request creates the host queue; keep it out of the windows.
	_, err = t.call(ctx, 0)
	return err
}

func echo(_ context.Context, req *responder.Request) (*responder.Reply, error) {
	return &responder.Reply{Body: req.Body()}, nil
}

func (t *tempQueues) call(ctx context.Context, caller int) (time.Duration, error) {
	start := time.Now()
	b := body(caller)
	m, err := t.req.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(t.queueURL), MessageBody: aws.String(b)})
	if err != nil {
		return 0, err
	}
	return time.Since(start), checkReply(b, m.Body)
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
// static-reply-queue contenders: pollers long-poll loops, each handling the
// messages of a receive concurrently, with one SendMessage (the reply, to
// the request's ReplyTo queue) and one DeleteMessage per request.
type worker struct {
	client   *sqs.Client
	queueURL string
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func startWorker(client *sqs.Client, queueURL string, pollers int) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{client: client, queueURL: queueURL, cancel: cancel}
	for range pollers {
		w.wg.Add(1)
		go w.poll(ctx)
	}
	return w
}

func (w *worker) poll(ctx context.Context) {
	defer w.wg.Done()
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
		var handlers sync.WaitGroup
		for _, m := range out.Messages {
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				w.handle(ctx, m)
			}()
		}
		handlers.Wait()
	}
}

func (w *worker) handle(ctx context.Context, m types.Message) {
	replyTo := aws.ToString(m.MessageAttributes[replyToAttribute].StringValue)
	id := m.MessageAttributes[correlationIDAttribute]
	if _, err := w.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(replyTo), MessageBody: m.Body,
		MessageAttributes: map[string]types.MessageAttributeValue{correlationIDAttribute: id},
	}); err != nil {
		return // redelivered after the visibility timeout
	}
	_, _ = w.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(w.queueURL), ReceiptHandle: m.ReceiptHandle})
}

func (w *worker) stop() {
	w.cancel()
	w.wg.Wait()
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
	q.worker = startWorker(q.client, q.queueURL, q.cfg.ServerPollers)
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
	b := body(caller)
	id := uuid.NewString()
	if _, err := q.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(q.queueURL), MessageBody: aws.String(b),
		MessageAttributes: map[string]types.MessageAttributeValue{replyToAttribute: wire.StringAttribute(replyURL), correlationIDAttribute: wire.StringAttribute(id)},
	}); err != nil {
		return err
	}
	m, err := receiveOne(ctx, q.client, replyURL)
	if err != nil {
		return err
	}
	return checkReply(b, m.Body)
}

func (q *queuePerRequest) close(ctx context.Context) error {
	if q.worker != nil {
		q.worker.stop()
	}
	return deleteQueues(ctx, q.client, q.queueURL)
}

// staticReply is one real reply queue for the requester process: requests
// carry a correlation id; one receive loop hands replies to their callers
// and deletes each with its own DeleteMessage.
type staticReply struct {
	*env
	client             *sqs.Client
	queueURL, replyURL string
	worker             *worker

	cancel  context.CancelFunc
	loop    sync.WaitGroup
	deletes sync.WaitGroup

	mu      sync.Mutex
	waiting map[string]chan *string
}

func (s *staticReply) name() string { return StaticReplyQueue }

func (s *staticReply) setup(ctx context.Context) error {
	var err error
	if s.queueURL, err = createQueue(ctx, s.client, s.queueName("static-requests")); err != nil {
		return err
	}
	if s.replyURL, err = createQueue(ctx, s.client, s.queueName("static-replies")); err != nil {
		return err
	}
	s.waiting = make(map[string]chan *string)
	s.worker = startWorker(s.client, s.queueURL, s.cfg.ServerPollers)
	lctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.loop.Add(1)
	go s.receive(lctx)
	return nil
}

func (s *staticReply) receive(ctx context.Context) {
	defer s.loop.Done()
	for ctx.Err() == nil {
		out, err := s.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(s.replyURL), MaxNumberOfMessages: 10, WaitTimeSeconds: longPoll,
			MessageAttributeNames: []string{correlationIDAttribute},
		})
		if err != nil {
			if ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		for _, m := range out.Messages {
			id := aws.ToString(m.MessageAttributes[correlationIDAttribute].StringValue)
			s.mu.Lock()
			ch := s.waiting[id]
			delete(s.waiting, id)
			s.mu.Unlock()
			if ch != nil {
				ch <- m.Body
			}
			s.deletes.Add(1)
			go func() {
				defer s.deletes.Done()
				dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, _ = s.client.DeleteMessage(dctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.replyURL), ReceiptHandle: m.ReceiptHandle})
			}()
		}
	}
}

func (s *staticReply) call(ctx context.Context, caller int) (time.Duration, error) {
	start := time.Now()
	b := body(caller)
	id := uuid.NewString()
	ch := make(chan *string, 1)
	s.mu.Lock()
	s.waiting[id] = ch
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		delete(s.waiting, id)
		s.mu.Unlock()
	}
	if _, err := s.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(s.queueURL), MessageBody: aws.String(b),
		MessageAttributes: map[string]types.MessageAttributeValue{replyToAttribute: wire.StringAttribute(s.replyURL), correlationIDAttribute: wire.StringAttribute(id)},
	}); err != nil {
		forget()
		return 0, err
	}
	select {
	case got := <-ch:
		return time.Since(start), checkReply(b, got)
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
		s.cancel()
		s.loop.Wait()
		s.deletes.Wait()
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
	for range n {
		var p [2]string
		for i, kind := range []string{"floor-req", "floor-rep"} {
			u, err := createQueue(ctx, f.client, f.queueName(kind))
			if err != nil {
				return err
			}
			p[i] = u
		}
		f.pairs = append(f.pairs, p)
	}
	return nil
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
	b := body(caller)
	start := time.Now()
	if _, err := f.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(p[0]), MessageBody: aws.String(b)}); err != nil {
		return 0, err
	}
	req, err := receiveOne(ctx, f.client, p[0])
	if err != nil {
		return 0, err
	}
	if _, err := f.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(p[1]), MessageBody: req.Body}); err != nil {
		return 0, err
	}
	rep, err := receiveOne(ctx, f.client, p[1])
	if err != nil {
		return 0, err
	}
	lat := time.Since(start)
	if err := checkReply(b, rep.Body); err != nil {
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
	var urls []string
	for _, p := range f.pairs {
		urls = append(urls, p[0], p[1])
	}
	return deleteQueues(ctx, f.client, urls...)
}
