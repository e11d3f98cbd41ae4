package responder

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// tag is a middleware that records its name on the way in and appends it
// to the reply body on the way out.
func tag(name string, mu *sync.Mutex, order *[]string) func(Handler) Handler {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			mu.Lock()
			*order = append(*order, name)
			mu.Unlock()
			reply, err := next.HandleRequest(ctx, req)
			if reply != nil {
				reply.Body += "<" + name
			}
			return reply, err
		})
	}
}

func TestMiddlewareOrderInServe(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t))
	q := e.queue("mw", nil)
	replies := e.replyQueue("mw-replies", nil)
	var mu sync.Mutex
	var order []string
	r := newResponder(t, e.client, func(o *Options) {
		o.PollWaitTime = time.Second
		o.Middleware = []func(Handler) Handler{tag("a", &mu, &order), tag("b", &mu, &order)}
	})
	serve(t, r, q, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
		mu.Lock()
		order = append(order, "handler")
		mu.Unlock()
		return &Reply{Body: req.Body()}, nil
	}))
	e.request(q, "x", replies, "id-1")
	got := e.replies(replies, 1, 10*time.Second)
	if len(got) != 1 {
		t.Fatalf("got %d replies, want 1", len(got))
	}
	if body := aws.ToString(got[0].Body); body != "x<b<a" {
		t.Errorf("reply body %q, want x<b<a (the first middleware outermost)", body)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []string{"a", "b", "handler"}) {
		t.Errorf("order %v, want [a b handler]", order)
	}
}

func TestMiddlewareNil(t *testing.T) {
	e := newEnv(t, sqstestenv.SQSTest(t))
	q := e.queue("mwnil", nil)
	for name, mw := range map[string]func(Handler) Handler{
		"nil middleware": nil,
		"nil result":     func(Handler) Handler { return nil },
	} {
		r := newResponder(t, e.client, func(o *Options) { o.Middleware = []func(Handler) Handler{mw} })
		h := HandlerFunc(func(context.Context, *Request) (*Reply, error) { return nil, nil })
		if err := r.Serve(context.Background(), q, h); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: Serve = %v, want ErrInvalidInput", name, err)
		}
		if err := r.Process(context.Background(), q, types.Message{}, h); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: Process = %v, want ErrInvalidInput", name, err)
		}
	}
}

// receiveOne receives one message with everything Serve asks for.
func receiveOne(t *testing.T, e *env, q string) types.Message {
	t.Helper()
	out, err := e.client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: &q, WaitTimeSeconds: 5, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("ReceiveMessage: %v, %d messages", err, len(out.Messages))
	}
	return out.Messages[0]
}

func TestProcess(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		q := e.queue("proc", nil)
		replies := e.replyQueue("proc-replies", nil)
		var mu sync.Mutex
		var order []string
		runs := 0
		r := newResponder(t, e.client, func(o *Options) {
			o.Store = NewMemoryStore()
			o.BackoffBase = time.Second
			o.BackoffBase, o.BackoffCap = 4*time.Second, 4*time.Second
			o.Middleware = []func(Handler) Handler{tag("a", &mu, &order)}
		})
		h := HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			runs++
			switch req.Body() {
			case "fail":
				return nil, errors.New("no")
			case "panic":
				panic("boom")
			}
			return &Reply{Body: strings.ToUpper(req.Body())}, nil
		})

		e.request(q, "ok", replies, "id-ok")
		m := receiveOne(t, e, q)
		if err := r.Process(context.Background(), q, m, h); err != nil {
			t.Fatalf("Process: %v", err)
		}
		// A redelivery is answered from the store.
		if err := r.Process(context.Background(), q, m, h); err != nil {
			t.Fatalf("Process again: %v", err)
		}
		got := e.replies(replies, 2, 10*time.Second)
		if len(got) != 2 || aws.ToString(got[0].Body) != "OK<a" || aws.ToString(got[1].Body) != "OK<a" {
			t.Fatalf("replies %v, want two OK<a", got)
		}
		if runs != 1 {
			t.Errorf("handler ran %d times, want 1 (the second from the store)", runs)
		}

		e.request(q, "fail", replies, "id-fail")
		err := r.Process(context.Background(), q, receiveOne(t, e, q), h)
		var re *RetryError
		if !errors.As(err, &re) || !re.Release || re.Delay > 4*time.Second || re.Err == nil || re.Err.Error() != "no" {
			t.Errorf("failed handler: Process = %#v, want a *RetryError with Release, Delay <= 4s, Err no", err)
		}
		e.request(q, "panic", replies, "id-panic")
		err = r.Process(context.Background(), q, receiveOne(t, e, q), h)
		var pe *PanicError
		if !errors.As(err, &pe) || pe.Value != "boom" {
			t.Errorf("panicking handler: Process = %v, want a *PanicError", err)
		}
		if err := r.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := r.Process(context.Background(), q, m, h); !errors.Is(err, sqsapi.ErrClosed) {
			t.Errorf("Process after Shutdown = %v, want sqsapi.ErrClosed", err)
		}
	})
}
