package requester_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// result is what an Observer's done func saw.
type result struct {
	body string
	err  error
}

// propagatorFunc makes an observe.Propagator of a function.
type propagatorFunc func(ctx context.Context, e observe.Event, attrs map[string]types.MessageAttributeValue, sys map[string]types.MessageSystemAttributeValue, room int) context.Context

func (f propagatorFunc) Inject(ctx context.Context, e observe.Event, attrs map[string]types.MessageAttributeValue, sys map[string]types.MessageSystemAttributeValue, room int) context.Context {
	return f(ctx, e, attrs, sys, room)
}

type hookKey struct{}

// The Propagator's attributes go on the wire and the context it returns
// reaches the Observer; an Observer that changes all it is given changes
// nothing sent and nothing the caller gets.
func TestPropagatorWritesObserverOnlyWatches(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		var mu sync.Mutex
		var results []result
		var rooms []int
		r := e.requester(t, func(o *requester.Options) {
			o.Propagator = propagatorFunc(func(ctx context.Context, ev observe.Event, attrs map[string]types.MessageAttributeValue, sys map[string]types.MessageSystemAttributeValue, room int) context.Context {
				if ev.Kind != observe.Send || ev.Queue != e.queue || ev.RequestID == "" {
					t.Errorf("propagator got %+v, want a Send to %s with a request id", ev, e.queue)
				}
				if aws.ToString(ev.Message.Body) == "panic" {
					panic("hook")
				}
				mu.Lock()
				rooms = append(rooms, room)
				mu.Unlock()
				attrs["hooked"] = wire.StringAttribute("yes")
				sys["AWSTraceHeader"] = types.MessageSystemAttributeValue{DataType: aws.String("String"),
					StringValue: aws.String("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")}
				return context.WithValue(ctx, hookKey{}, "propagated")
			})
			o.Observer = observe.Func(func(ctx context.Context, ev observe.Event) func(*types.Message, error) {
				if ev.Kind != observe.Send {
					return nil
				}
				body := aws.ToString(ev.Message.Body)
				if body != "panic" && (ctx.Value(hookKey{}) != "propagated" || aws.ToString(ev.Message.MessageAttributes["hooked"].StringValue) != "yes") {
					t.Errorf("observer of %q: context value %v, attributes %v: not the propagator's", body, ctx.Value(hookKey{}), ev.Message.MessageAttributes)
				}
				// Change everything: none of it may reach the wire.
				*ev.Message.Body = "changed"
				ev.Message.MessageAttributes["observer"] = wire.StringAttribute("yes")
				for k, v := range ev.Message.MessageAttributes {
					if v.StringValue != nil {
						*v.StringValue = "changed"
					}
					ev.Message.MessageAttributes[k] = v
				}
				return func(m *types.Message, err error) {
					mu.Lock()
					defer mu.Unlock()
					res := result{err: err}
					if m != nil {
						res.body = aws.ToString(m.Body)
						*m.Body = "changed"
					}
					results = append(results, res)
				}
			})
		})
		ctx, stop := context.WithCancel(context.Background())
		var echo sync.WaitGroup
		defer echo.Wait()
		defer stop()
		// A responder that echoes the hook's attributes, ended with the test.
		echo.Add(1)
		go func() {
			defer echo.Done()
			for ctx.Err() == nil {
				out, err := e.raw.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
					QueueUrl: aws.String(e.queue), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
					MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAWSTraceHeader},
				})
				if err != nil {
					continue
				}
				for _, m := range out.Messages {
					host, name, _ := wire.ParseVirtualQueueURL(aws.ToString(m.MessageAttributes[sqsapi.ResponseQueueURLAttribute].StringValue))
					body := fmt.Sprintf("%s %s %s", aws.ToString(m.Body), aws.ToString(m.MessageAttributes["hooked"].StringValue), prefix(m.Attributes["AWSTraceHeader"], 5))
					if _, ok := m.MessageAttributes["observer"]; ok {
						body += " observer"
					}
					_, _ = e.raw.SendMessage(ctx, &sqs.SendMessageInput{
						QueueUrl: aws.String(host), MessageBody: aws.String(body),
						MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.VirtualQueueNameAttribute: wire.StringAttribute(name)},
					})
					_, _ = e.raw.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(e.queue), ReceiptHandle: m.ReceiptHandle})
				}
			}
		}()

		in := &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("ping")}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		m, err := r.SendMessageAndGetResponse(cctx, in)
		if err != nil {
			t.Fatal(err)
		}
		want := "ping yes Root="
		if b.Name == "fauxqs" {
			want = "ping yes " // fauxqs drops the AWSTraceHeader system attribute
		}
		if got := aws.ToString(m.Body); got != want {
			t.Errorf("reply %q: the propagator's attributes did not reach the responder, or the observer's did", got)
		}
		if in.MessageAttributes != nil || in.MessageSystemAttributes != nil {
			t.Errorf("the caller's input was changed: %v %v", in.MessageAttributes, in.MessageSystemAttributes)
		}

		// The propagator's attributes count against the limit: with 8 of
		// the caller's, the 9th (the propagator's, which ignores its room
		// of 0) leaves no room for the two the requester adds. Rejected
		// before any call.
		before := e.counter.Snapshot()["SendMessage"] + e.counter.Snapshot()["SendMessageBatch"]
		full := map[string]types.MessageAttributeValue{}
		for i := range 8 {
			full[fmt.Sprint("a", i)] = wire.StringAttribute("v")
		}
		_, err = r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("full"), MessageAttributes: full})
		if !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("8 attributes with the hook's: %v, want ErrInvalidInput", err)
		}
		if after := e.counter.Snapshot()["SendMessage"] + e.counter.Snapshot()["SendMessageBatch"]; after != before {
			t.Errorf("a rejected request made %d send calls", after-before)
		}
		// A panicking propagator is recovered; the request goes out
		// without its attributes.
		if m, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("panic")}); err != nil || aws.ToString(m.Body) != "panic  " {
			t.Errorf("after a panicking hook: %v %v", m, err)
		}

		mu.Lock()
		defer mu.Unlock()
		if len(results) != 3 || results[0].body != want || results[0].err != nil || !errors.Is(results[1].err, sqsapi.ErrInvalidInput) || results[2].body != "panic  " {
			t.Errorf("done functions saw %+v, want the reply, the invalid input, the reply", results)
		}
		if !slices.Equal(rooms, []int{8, 0}) {
			t.Errorf("the propagator's rooms %v, want [8 0]: 10 less ResponseQueueUrl and TempQueues.RequestId, then 8 of the caller's", rooms)
		}
	})
}

func prefix(s string, n int) string { return s[:min(n, len(s))] }
