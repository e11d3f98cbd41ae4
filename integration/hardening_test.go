package integration_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/faultproxy"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// hostQueues lists the queues under the env's prefix.
func (e *env) hostQueues(t *testing.T) []string {
	t.Helper()
	out, err := e.raw.ListQueues(context.Background(), &sqs.ListQueuesInput{QueueNamePrefix: aws.String(e.prefix)})
	if err != nil {
		t.Fatal(err)
	}
	return out.QueueUrls
}

// Every SDK attempt of the host queue's CreateQueue loses its response
// (the server created the queue): the next request uses that queue, and
// Close deletes it; nothing is left for the sweepers.
func TestHardeningLostCreateQueueResponses(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		if b.Endpoint == "" {
			t.Skip("needs an endpoint to put the proxy in front of")
		}
		p := faultproxy.Start(t, b.Endpoint, 1)
		e := newEnv(t, &sqstestenv.Backend{Name: b.Name, Endpoint: p.URL()})
		q := e.queue(t, "rpc", nil)
		serve(t, e.raw, q, func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: "echo " + req.Body()}, nil
		})
		r := e.requester(t)
		p.SetRules(faultproxy.Rule{Op: "CreateQueue", Kind: faultproxy.Drop, Share: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		in := &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("x")}
		if _, err := r.SendMessageAndGetResponse(ctx, in); err == nil {
			t.Fatal("a request succeeded although every CreateQueue response was lost")
		}
		if n := p.Injected("CreateQueue", faultproxy.Drop); n < 1 {
			t.Fatalf("the proxy dropped %d CreateQueue responses", n)
		}
		p.SetRules()
		if m, err := r.SendMessageAndGetResponse(ctx, in); err != nil || aws.ToString(m.Body) != "echo x" {
			t.Fatalf("request after the losses: %v, %v", m, err)
		}
		if got := e.hostQueues(t); len(got) != 1 || !strings.HasSuffix(got[0], "-0") {
			t.Fatalf("host queues %v: want only the first one asked for", got)
		}
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.hostQueues(t); len(got) != 0 {
			t.Fatalf("host queues left after Close: %v", got)
		}
	})
}

// A caller's mistakes get a typed error before any call and leave nothing
// behind: a typed-nil client, a body SQS would reject, a nil option
// function.
func TestHardeningCallerMistakes(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		if _, err := requester.New((*sqs.Client)(nil)); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("requester.New(typed nil) = %v", err)
		}
		if _, err := responder.New((*sqs.Client)(nil)); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("responder.New(typed nil) = %v", err)
		}
		e := newEnv(t, b)
		q := e.queue(t, "rpc", nil)
		r := e.requester(t)
		before := e.counter.Total()
		for _, in := range []*sqs.SendMessageInput{
			{QueueUrl: aws.String(q), MessageBody: aws.String("nul \x00")},
			{QueueUrl: aws.String(q), MessageBody: aws.String("\uFFFE")},
			{QueueUrl: aws.String(q), MessageBody: aws.String("bad utf-8 \xff")},
			{QueueUrl: aws.String(q), MessageBody: aws.String("x"), MessageAttributes: map[string]types.MessageAttributeValue{
				"a": {DataType: aws.String("String"), StringValue: aws.String("\x01")}}},
		} {
			if _, err := r.SendMessageAndGetResponse(context.Background(), in); !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Errorf("request %q: %v, want ErrInvalidInput", aws.ToString(in.MessageBody), err)
			}
		}
		if _, err := r.SendMessageAndGetResponse(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("x")}, nil); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("nil option function: %v, want ErrInvalidInput", err)
		}
		if n := e.counter.Total() - before; n != 0 {
			t.Errorf("%d API calls for requests rejected as invalid", n)
		}
		if s := r.Stats(); s.Pending != 0 {
			t.Errorf("%d calls left pending", s.Pending)
		}
	})
}
