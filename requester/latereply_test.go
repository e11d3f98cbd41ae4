package requester_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestADuplicateReplyIsSeenWithoutAnotherRequest: after a few calls (so
// that the requester keeps a spare poller), a responder answers the last
// request twice, the second just after the call completed, and nothing
// else happens. A lingering receive takes the duplicate, deletes it and
// counts it as a late reply within seconds, on a server that answers one
// parked poll per message (sqstest) and on one that answers every parked
// poll when a message arrives (fauxqs), whichever poller ended last.
func TestADuplicateReplyIsSeenWithoutAnotherRequest(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		r := e.requester(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		const calls = 12
		duplicate := make(chan func(), 1)
		go func() {
			for n := 0; n < calls && ctx.Err() == nil; {
				out, err := e.raw.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
					QueueUrl: aws.String(e.queue), WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
				})
				if err != nil || len(out.Messages) == 0 {
					continue
				}
				m := out.Messages[0]
				_, _ = e.raw.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(e.queue), ReceiptHandle: m.ReceiptHandle})
				host, name, err := wire.ParseVirtualQueueURL(aws.ToString(m.MessageAttributes[sqsapi.ResponseQueueURLAttribute].StringValue))
				if err != nil {
					t.Error(err)
					return
				}
				reply := func() {
					if _, err := e.raw.SendMessage(ctx, &sqs.SendMessageInput{
						QueueUrl: aws.String(host), MessageBody: aws.String("re"),
						MessageAttributes: map[string]types.MessageAttributeValue{
							sqsapi.VirtualQueueNameAttribute: wire.StringAttribute(name),
							sqsapi.CorrelationIDAttribute:    m.MessageAttributes[sqsapi.RequestIDAttribute],
						},
					}); err != nil {
						t.Error(err)
					}
				}
				reply()
				if n++; n == calls {
					duplicate <- reply
				}
			}
		}()
		for i := range calls {
			if _, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		dup := <-duplicate
		time.Sleep(100 * time.Millisecond) // the duplicate comes once the pollers saw no more demand
		dup()
		// Real time: the server is real here.
		testtime.Until(5*time.Second, func() bool { return r.Stats().LateReplies >= 1 })
		if s := r.Stats(); s.LateReplies != 1 {
			t.Errorf("%d late replies counted within 5 s of a duplicate, want 1", s.LateReplies)
		}
	})
}
