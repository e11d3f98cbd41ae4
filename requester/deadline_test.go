package requester_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// receiveRequest takes one request off queue with all its attributes.
func (e *env) receiveRequest(t *testing.T, queue string) types.Message {
	t.Helper()
	for range 10 {
		out, err := e.raw.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queue), WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) > 0 {
			return out.Messages[0]
		}
	}
	t.Fatal("no request arrived")
	return types.Message{}
}

// userAttrs returns n String attributes of the caller's own.
func userAttrs(n int) map[string]types.MessageAttributeValue {
	m := map[string]types.MessageAttributeValue{}
	for i := range n {
		m[fmt.Sprint("a", i)] = wire.StringAttribute("v")
	}
	return m
}

// TestRequestsCarryTheCallersDeadline checks that a request carries its
// caller's deadline (the context's, or Options.Timeout's) in Unix
// milliseconds, and goes without it, and without an error, when the
// message has no room left.
func TestRequestsCarryTheCallersDeadline(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		r := e.requester(t, func(o *requester.Options) { o.Timeout = 7 * time.Second })

		deadlineOf := func(m types.Message) (time.Time, bool) {
			t.Helper()
			d, ok, err := wire.Deadline(m)
			if err != nil {
				t.Fatal(err)
			}
			return d, ok
		}
		send := func(ctx context.Context, attrs map[string]types.MessageAttributeValue) *requester.Call {
			t.Helper()
			call, err := r.SendMessageAndGetResponseAsync(ctx, &sqs.SendMessageInput{
				QueueUrl: aws.String(e.queue), MessageBody: aws.String("x"), MessageAttributes: attrs,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { call.Cancel() })
			return call
		}

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		want, _ := ctx.Deadline()
		send(ctx, nil)
		if d, ok := deadlineOf(e.receiveRequest(t, e.queue)); !ok || d.UnixMilli() != want.UnixMilli() {
			t.Errorf("deadline %v (%v), want the context's %v", d, ok, want)
		}

		before := time.Now()
		send(context.Background(), nil)
		if d, ok := deadlineOf(e.receiveRequest(t, e.queue)); !ok || d.Before(before.Add(7*time.Second).Truncate(time.Millisecond)) || d.After(time.Now().Add(7*time.Second)) {
			t.Errorf("deadline %v (%v), want Options.Timeout (7s) from the send at %v", d, ok, before)
		}

		// 7 of the caller's, ResponseQueueUrl and TempQueues.RequestId: room
		// for one more.
		send(ctx, userAttrs(7))
		if _, ok := deadlineOf(e.receiveRequest(t, e.queue)); !ok {
			t.Error("a request with room for the deadline went without it")
		}
		// 8 of the caller's: no room; the request goes without.
		send(ctx, userAttrs(8))
		if m := e.receiveRequest(t, e.queue); len(m.MessageAttributes) != 10 {
			t.Errorf("request has %d attributes, want 10 without the deadline", len(m.MessageAttributes))
		}
	})
}

func TestCallerMayNotSetTheDeadlineAttribute(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	e := newEnv(t, b)
	r := e.requester(t)
	_, err := r.SendMessageAndGetResponse(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(e.queue), MessageBody: aws.String("x"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			sqsapi.DeadlineAttribute: wire.StringAttribute(strconv.FormatInt(time.Now().UnixMilli(), 10)),
		},
	})
	if !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Fatalf("err = %v, want ErrInvalidInput", err)
	}
}
