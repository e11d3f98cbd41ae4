package requester_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// serveRecording runs a responder on queue that echoes requests and records
// the ResponseQueueUrl they carry; it shuts down when the test ends.
func serveRecording(t *testing.T, client *sqs.Client, queue string) *sync.Map {
	t.Helper()
	var seen sync.Map
	serve(t, client, func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
		u, _ := req.Attribute(sqsapi.ResponseQueueURLAttribute)
		seen.Store(u, true)
		return &responder.Reply{Body: "echo:" + req.Body()}, nil
	}, queue)
	return &seen
}

// A requester whose host queue is FIFO answers concurrent RPCs, to a
// standard request queue and to a FIFO one; replies go to reply queues on
// the FIFO host (the responder sets their group and deduplication id).
func TestFIFOHostQueueAnswersRPCs(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		fifoOut, err := e.raw.CreateQueue(context.Background(), &sqs.CreateQueueInput{
			QueueName:  aws.String(sqstestenv.QueueName(t, "freq") + ".fifo"),
			Attributes: map[string]string{"FifoQueue": "true"},
		})
		if err != nil {
			t.Fatal(err)
		}
		fifoQueue := *fifoOut.QueueUrl
		t.Cleanup(func() { _, _ = e.raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &fifoQueue}) })
		// The responders poll through a client of their own, so the
		// requester's call count below holds only the requester's calls.
		served, _ := b.Client(t)
		seen := serveRecording(t, served, e.queue)
		seenFIFO := serveRecording(t, served, fifoQueue)
		r := e.requester(t, func(o *requester.Options) { o.HostQueueAttributes = map[string]string{"FifoQueue": "true"} })

		// A request to a FIFO queue needs the caller's group, before any call.
		e.counter.Reset()
		if _, err := r.SendMessageAndGetResponse(context.Background(), &sqs.SendMessageInput{QueueUrl: &fifoQueue, MessageBody: aws.String("x")}); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Fatalf("no group: %v", err)
		}
		if n := e.counter.Total(); n != 0 {
			t.Fatalf("rejected request made %d calls: %v", n, e.counter.Snapshot())
		}

		const calls = 16
		var wg sync.WaitGroup
		for i := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				in := &sqs.SendMessageInput{QueueUrl: &e.queue, MessageBody: aws.String(fmt.Sprint(i))}
				if i%2 == 1 {
					in = &sqs.SendMessageInput{QueueUrl: &fifoQueue, MessageBody: aws.String(fmt.Sprint(i)), MessageGroupId: aws.String("callers")}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				reply, err := r.SendMessageAndGetResponse(ctx, in)
				if err != nil {
					t.Errorf("call %d: %v", i, err)
					return
				}
				if got, want := aws.ToString(reply.Body), fmt.Sprint("echo:", i); got != want {
					t.Errorf("call %d: reply %q, want %q", i, got, want)
				}
			}()
		}
		wg.Wait()
		for _, m := range []*sync.Map{seen, seenFIFO} {
			m.Range(func(k, _ any) bool {
				if host, _, _ := strings.Cut(k.(string), "#"); !strings.HasSuffix(host, ".fifo") || !strings.Contains(host, e.prefix) {
					t.Errorf("reply queue %s is not on a FIFO host queue of the requester's", k)
				}
				return true
			})
		}
		if s := r.Stats(); requester.Replied(r) != calls || s.LateReplies != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// The FIFO host queue's name must fit 80 characters with ".fifo".
func TestFIFOHostQueuePrefix(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	raw, _ := b.Client(t)
	_, err := requester.New(raw, func(o *requester.Options) {
		o.Prefix = strings.Repeat("p", 36)
		o.HostQueueAttributes = map[string]string{"FifoQueue": "true"}
	})
	if !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Fatalf("36-character prefix: %v", err)
	}
	r, err := requester.New(raw, func(o *requester.Options) {
		o.Prefix = strings.Repeat("p", 35)
		o.HostQueueAttributes = map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}
		o.DisableSweeping = true
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close(context.Background())
	if _, err := requester.New(raw, func(o *requester.Options) {
		o.HostQueueAttributes = map[string]string{"ContentBasedDeduplication": "true"}
	}); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Fatalf("FIFO attribute on a standard host: %v", err)
	}
}

// A stream on a FIFO host: every reply is in one message group (the
// request's reply queue), so each delete must go out at once or the next
// reply waits behind it; 100 parts and the final reply arrive in order
// well within the deadline.
func TestFIFOHostQueueStream(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		serve(t, e.raw, streamHandler(100, 0), e.queue)
		r := e.requester(t, func(o *requester.Options) { o.HostQueueAttributes = map[string]string{"FifoQueue": "true"} })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := r.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("job")})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m, err := range s.All(ctx) {
			if err != nil {
				t.Fatalf("after %d replies: %v", n, err)
			}
			want := "part " + strconv.Itoa(n)
			if n == 100 {
				want = "final of job"
			}
			if got := aws.ToString(m.Body); got != want {
				t.Fatalf("reply %d is %q, want %q", n, got, want)
			}
			n++
		}
		if n != 101 {
			t.Fatalf("got %d replies, want 101", n)
		}
	})
}
