package responder

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// stuckSends is a Client whose SendMessageBatch hangs until its context
// ends, as an SDK call to an unresponsive endpoint does, or the test
// releases it. It records how far away the deadline of each call was. Any
// other call panics (the embedded Client is nil): a reply makes none.
type stuckSends struct {
	Client
	release chan struct{}

	mu    sync.Mutex
	lead  []time.Duration // deadline - call time; -1 for none
	calls int
}

func (c *stuckSends) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	lead := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		lead = time.Until(dl)
	}
	c.mu.Lock()
	c.calls++
	c.lead = append(c.lead, lead)
	c.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.release:
		return nil, errors.New("released by the test")
	}
}

// TestReplyHasItsOwnDeadline: a reply whose send hangs gives up after
// Options.ReplyTimeout, though its caller's context has no deadline, and
// the request is left for redelivery; the worker is free again.
func TestReplyHasItsOwnDeadline(t *testing.T) {
	const timeout = 50 * time.Millisecond
	c := &stuckSends{release: make(chan struct{})}
	r := newResponder(t, c, func(o *Options) {
		o.ReplyTimeout = timeout
		o.Logger = slog.New(slog.DiscardHandler)
		o.AllowReplyTo = []string{"replies"} // a plain reply queue, not a requester's
	})
	t.Cleanup(func() { close(c.release) }) // before the Shutdown newResponder registered
	m := msgWith(map[string]string{
		sqsapi.ResponseQueueURLAttribute: "https://sqs.us-east-1.amazonaws.com/1/replies",
		sqsapi.RequestIDAttribute:        "id-1",
	})
	err := r.Process(context.Background(), "https://sqs.us-east-1.amazonaws.com/1/requests", m, echo)
	var re *RetryError
	if !errors.As(err, &re) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Process with a hanging reply send = %v, want a *RetryError for context.DeadlineExceeded", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == 0 {
		t.Fatal("no reply send was made")
	}
	for i, lead := range c.lead {
		if lead < 0 || lead > timeout {
			t.Errorf("send %d ran under a deadline %v away, want at most ReplyTimeout (%v)", i, lead, timeout)
		}
	}
	if st := r.Stats(); st.Errors != 1 || st.Handled != 1 {
		t.Errorf("Stats: Errors %d, Handled %d; want 1 and 1", st.Errors, st.Handled)
	}
}

func TestReplyTimeoutOption(t *testing.T) {
	if _, err := New(&faultClient{}, func(o *Options) { o.ReplyTimeout = -time.Second }); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("negative ReplyTimeout: %v, want ErrInvalidInput", err)
	}
	r, err := New(&faultClient{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	if r.opts.ReplyTimeout != defaultReplyTimeout {
		t.Errorf("default ReplyTimeout %v, want %v", r.opts.ReplyTimeout, defaultReplyTimeout)
	}
}

// okSends is a Client whose SendMessageBatch succeeds, unless its
// context has ended already. Any other call panics (the embedded Client
// is nil): a reply makes none.
type okSends struct {
	Client
	mu    sync.Mutex
	calls int
}

func (c *okSends) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m-" + aws.ToString(e.Id))})
	}
	return out, nil
}

// TestReplyOfALongHandlerGoes: the calls after the handler have a bound
// of their own, from the handler's end: a handler that ran longer than
// the bound of the calls before it still gets its reply sent. It runs in
// a synctest bubble: the handler's long run is on the bubble's clock.
func TestReplyOfALongHandlerGoes(t *testing.T) {
	synctest.Test(t, testReplyOfALongHandlerGoes)
}

func testReplyOfALongHandlerGoes(t *testing.T) {
	c := &okSends{}
	r := newResponder(t, c, func(o *Options) {
		o.Logger = slog.New(slog.DiscardHandler)
		o.AllowReplyTo = []string{"replies"}
	})
	r.callBound = 100 * time.Millisecond
	m := msgWith(map[string]string{
		sqsapi.ResponseQueueURLAttribute: "https://sqs.us-east-1.amazonaws.com/1/replies",
		sqsapi.RequestIDAttribute:        "id-1",
	})
	slow := HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
		testtime.Pause(3 * r.callBound)
		return &Reply{Body: "late but fine"}, nil
	})
	if err := r.Process(context.Background(), "https://sqs.us-east-1.amazonaws.com/1/requests", m, slow); err != nil {
		t.Fatalf("Process of a handler that outran the calls' bound: %v, want nil", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls != 1 {
		t.Errorf("%d sends, want the reply's", c.calls)
	}
}
