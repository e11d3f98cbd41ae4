package bench

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// parkedReceivers is request-reply over SQS as popular messaging libraries
// do it (Watermill's SQS request-reply among them): one static reply queue
// per requester process and a correlation id per request, with one
// ReceiveMessage (MaxNumberOfMessages 1, WaitTimeSeconds 20) parked per
// caller on the reply queue and one per worker on the request queue, and
// no batching anywhere.
//
// Requester side: each caller that has called during the visit has a
// receiver of its own, a loop that long-polls the reply queue for one
// message, hands it to whichever caller waits for its correlation id (any
// receiver serves any caller), deletes it with DeleteMessage (a reply
// whose caller has gone too) and receives again.
//
// Responder side: ServerConcurrency workers, each a loop that long-polls
// the request queue for one message, sends the reply with SendMessage,
// deletes the request with DeleteMessage and receives again.
type parkedReceivers struct {
	*env
	client             *sqs.Client
	queueURL, replyURL string

	ctx    context.Context // the loops'; cancelled by close
	cancel context.CancelFunc
	loops  sync.WaitGroup // receivers and workers

	mu        sync.Mutex
	waiting   map[string]chan *string // by correlation id
	receivers int                     // one per caller seen
}

func (p *parkedReceivers) name() string { return ParkedReceivers }

func (p *parkedReceivers) setup(ctx context.Context) error {
	var err error
	if p.queueURL, err = createQueue(ctx, p.client, p.queueName("parked-requests")); err != nil {
		return err
	}
	if p.replyURL, err = createQueue(ctx, p.client, p.queueName("parked-replies")); err != nil {
		return err
	}
	p.waiting = make(map[string]chan *string)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for range p.cfg.ServerConcurrency {
		p.loops.Add(1)
		go p.work()
	}
	return nil
}

// receiveOne long-polls queueURL for at most one message; it returns
// false after an error, having paused a little unless the loops are
// stopping.
func (p *parkedReceivers) receiveOne(queueURL string, attributes []string) ([]types.Message, bool) {
	out, err := p.client.ReceiveMessage(p.ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 1, WaitTimeSeconds: longPoll,
		MessageAttributeNames: attributes,
	})
	if err != nil {
		_ = sleep(p.ctx, 100*time.Millisecond)
		return nil, false
	}
	return out.Messages, true
}

// deleteMessage deletes one message, even once the loops are stopping: a
// message received is deleted.
func (p *parkedReceivers) deleteMessage(queueURL string, m types.Message) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), 10*time.Second)
	defer cancel()
	_, _ = p.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle})
}

// work is one worker of the responder side.
func (p *parkedReceivers) work() {
	defer p.loops.Done()
	for p.ctx.Err() == nil {
		msgs, _ := p.receiveOne(p.queueURL, []string{"All"})
		for _, m := range msgs {
			if _, err := p.client.SendMessage(p.ctx, &sqs.SendMessageInput{
				QueueUrl:          m.MessageAttributes[replyToAttribute].StringValue,
				MessageBody:       aws.String(p.reply(aws.ToString(m.Body))),
				MessageAttributes: map[string]types.MessageAttributeValue{correlationIDAttribute: m.MessageAttributes[correlationIDAttribute]},
			}); err != nil {
				continue // redelivered after the visibility timeout
			}
			p.deleteMessage(p.queueURL, m)
		}
	}
}

// receive is one receiver of the requester side.
func (p *parkedReceivers) receive() {
	defer p.loops.Done()
	for p.ctx.Err() == nil {
		msgs, _ := p.receiveOne(p.replyURL, []string{correlationIDAttribute})
		for _, m := range msgs {
			id := aws.ToString(m.MessageAttributes[correlationIDAttribute].StringValue)
			p.mu.Lock()
			ch := p.waiting[id]
			delete(p.waiting, id)
			p.mu.Unlock()
			if ch != nil {
				ch <- m.Body
			}
			p.deleteMessage(p.replyURL, m)
		}
	}
}

func (p *parkedReceivers) call(ctx context.Context, caller int) (time.Duration, error) {
	start := time.Now()
	id := uuid.NewString()
	ch := make(chan *string, 1)
	p.mu.Lock()
	p.waiting[id] = ch
	// One receive parked per caller: start the receivers of callers not
	// seen before.
	for p.receivers <= caller && p.ctx.Err() == nil {
		p.receivers++
		p.loops.Add(1)
		go p.receive()
	}
	p.mu.Unlock()
	forget := func() {
		p.mu.Lock()
		delete(p.waiting, id)
		p.mu.Unlock()
	}
	if _, err := p.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(p.queueURL), MessageBody: aws.String(p.request(caller)),
		MessageAttributes: map[string]types.MessageAttributeValue{replyToAttribute: wire.StringAttribute(p.replyURL), correlationIDAttribute: wire.StringAttribute(id)},
	}); err != nil {
		forget()
		return 0, err
	}
	select {
	case got := <-ch:
		return time.Since(start), checkReply(p.body(caller), got)
	case <-ctx.Done():
		forget()
		return 0, ctx.Err()
	}
}

func (p *parkedReceivers) close(ctx context.Context) error {
	if p.cancel != nil {
		p.mu.Lock()
		p.cancel() // under p.mu: no call starts a receiver after it
		p.mu.Unlock()
		p.loops.Wait()
	}
	return deleteQueues(ctx, p.client, p.queueURL, p.replyURL)
}
