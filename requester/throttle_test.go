package requester_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqstest"
)

// A throttled request send is retried until the caller's deadline: it
// succeeds when the throttling ends in time, and otherwise fails at the
// deadline with a timeout that carries the throttling. The client keeps
// the SDK's default retryer: the requester's calls make one attempt each,
// so every throttle reaches it.
func TestThrottledSendIsRetriedUntilTheDeadline(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	e := newEnv(t, b)
	r := e.requester(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	e.rawResponder(t, ctx, 0)

	before := b.Server.Calls()
	b.Server.InjectFault(sqstest.Fail("SendMessageBatch", "RequestThrottled").Times(4))
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("burst")})
	if err != nil || aws.ToString(m.Body) != "re: burst" {
		t.Fatalf("RPC through 4 throttled sends: %v, %v", m, err)
	}
	if n := b.Server.Calls()["SendMessageBatch"] - before["SendMessageBatch"]; n != 5 {
		t.Fatalf("%d SendMessageBatch calls, want 4 throttled and 1 through", n)
	}

	remove := b.Server.InjectFault(sqstest.Fail("SendMessageBatch", "RequestThrottled"))
	defer remove()
	const wait = 700 * time.Millisecond
	cctx, cancel = context.WithTimeout(ctx, wait)
	defer cancel()
	start := time.Now()
	_, err = r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("never")})
	took := time.Since(start)
	var apiErr smithy.APIError
	if !errors.Is(err, requester.ErrTimeout) || !errors.As(err, &apiErr) || apiErr.ErrorCode() != "RequestThrottled" {
		t.Fatalf("err = %v, want ErrTimeout wrapping the throttling", err)
	}
	if took < wait-10*time.Millisecond {
		t.Fatalf("failed after %v, before the deadline of %v", took, wait)
	}
	t.Logf("under endless throttling: %v", err)
	if s := r.Stats(); s.TimedOut != 1 || s.Failed != 0 {
		t.Fatalf("stats %+v: want one timeout, no failure", s)
	}
}

// Sends that go alone (an SDK option makes one) are retried the same way.
func TestThrottledUnbatchedSendIsRetried(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	e := newEnv(t, b)
	r := e.requester(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	e.rawResponder(t, ctx, 0)

	b.Server.InjectFault(sqstest.Fail("SendMessage", "RequestThrottled").Times(3))
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	alone := func(*sqs.Options) {}
	m, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("burst")}, alone)
	if err != nil || aws.ToString(m.Body) != "re: burst" {
		t.Fatalf("RPC through 3 throttled sends: %v, %v", m, err)
	}
}
