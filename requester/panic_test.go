package requester_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// A caller's mistake in the SDK's option functions leaves nothing behind:
// a nil one is rejected before any call, and one that panics (the panic
// reaches the caller, as *sqs.Client's would) withdraws its call first.
// Before, both left the call pending, and its reply expected, until Close.
func TestBadOptionFunctionsLeaveNothing(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		r := e.requester(t)
		ctx := context.Background()
		in := &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String("x")}
		e.counter.Reset()
		call := func(async bool, fn func(*sqs.Options)) (p any, err error) {
			defer func() { p = recover() }()
			if async {
				_, err = r.SendMessageAndGetResponseAsync(ctx, in, fn)
			} else {
				_, err = r.SendMessageAndGetResponse(ctx, in, fn)
			}
			return nil, err
		}
		for _, async := range []bool{false, true} {
			p, err := call(async, nil)
			if p != nil || !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Errorf("async %v, nil option: panic %v, err %v; want ErrInvalidInput", async, p, err)
			}
			if s := r.Stats(); s.Pending != 0 || requester.Expecting(r) != 0 {
				t.Errorf("async %v, nil option: %d pending, %d expected", async, s.Pending, requester.Expecting(r))
			}
		}
		if n := e.counter.Total(); n != 0 {
			t.Errorf("nil options made %d calls: %v", n, e.counter.Snapshot())
		}
		boom := func(*sqs.Options) { panic("boom") }
		for _, async := range []bool{false, true} {
			p, err := call(async, boom)
			if p != "boom" {
				t.Errorf("async %v, panicking option: panic %v, err %v; want the option's panic", async, p, err)
			}
			if s := r.Stats(); s.Pending != 0 || requester.Expecting(r) != 0 {
				t.Errorf("async %v, panicking option: %d pending, %d expected", async, s.Pending, requester.Expecting(r))
			}
		}
		if s := r.Stats(); s.Failed != 2 || s.Pending != 0 || requester.Replied(r) != 0 {
			t.Errorf("stats %+v, want 2 failed", s)
		}
	})
}
