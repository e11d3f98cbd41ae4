package responder

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestStoredNilReplyEndsStream: a streaming request whose handler sent two
// messages and returned no reply ends its stream with an end mark; when
// the Store answers its redelivery, the replay sends the same end mark, so
// the requester's stream ends instead of waiting for its deadline.
func TestStoredNilReplyEndsStream(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		q := e.queue("stream", nil)
		replies := e.queue("stream-replies", nil)
		r := newResponder(t, e.client, func(o *Options) {
			o.Store = NewMemoryStore()
			o.AllowReplyTo = []string{"tq-"} // the test's plain reply queue
		})
		runs := 0
		h := HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			runs++
			for _, body := range []string{"a", "b"} {
				if err := req.Send(ctx, &Reply{Body: body}); err != nil {
					return nil, err
				}
			}
			return nil, nil
		})
		if _, err := e.client.SendMessage(context.Background(), &sqs.SendMessageInput{
			QueueUrl: aws.String(q), MessageBody: aws.String("go"),
			MessageAttributes: map[string]types.MessageAttributeValue{
				sqsapi.ResponseQueueURLAttribute: wire.StringAttribute(replies),
				sqsapi.RequestIDAttribute:        wire.StringAttribute("id-stream"),
				sqsapi.StreamAttribute:           wire.StringAttribute("1"),
			},
		}); err != nil {
			t.Fatal(err)
		}
		m := receiveOne(t, e, q)
		if err := r.Process(context.Background(), q, m, h); err != nil {
			t.Fatalf("Process: %v", err)
		}
		first := e.replies(replies, 3, 10*time.Second)
		ends := func(msgs []types.Message) []string {
			var out []string
			for _, m := range msgs {
				if v := attr(m, sqsapi.StreamAttribute); strings.HasSuffix(v, ";"+endMark) {
					out = append(out, v)
				}
			}
			return out
		}
		if len(first) != 3 || len(ends(first)) != 1 || ends(first)[0] != "2;"+endMark {
			t.Fatalf("first run sent %d messages with end marks %v, want 3 and [2;%s]", len(first), ends(first), endMark)
		}

		// The redelivery is answered from the Store.
		if err := r.Process(context.Background(), q, m, h); err != nil {
			t.Fatalf("Process again: %v", err)
		}
		if runs != 1 {
			t.Fatalf("handler ran %d times, want 1", runs)
		}
		again := e.replies(replies, 1, 5*time.Second)
		if len(again) != 1 || len(ends(again)) != 1 || ends(again)[0] != "2;"+endMark || aws.ToString(again[0].Body) != endBody {
			t.Fatalf("the replay sent %d messages with end marks %v, want the end mark 2;%s", len(again), ends(again), endMark)
		}
		if got := attr(again[0], sqsapi.CorrelationIDAttribute); got != "id-stream" {
			t.Errorf("replayed end mark correlates %q, want id-stream", got)
		}
	})
}
