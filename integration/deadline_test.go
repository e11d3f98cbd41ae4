package integration_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
)

// TestRequestOutlivedByItsCallerIsNotHandled is the case a new user met:
// the caller times out before any responder runs, and the responder that
// starts later deletes the request without running its handler, while a
// request sent after it, whose caller still waits, is answered.
func TestRequestOutlivedByItsCallerIsNotHandled(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		q := e.queue(t, "rpc", nil)
		r := e.requester(t)

		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("given up")})
		cancel()
		if !errors.Is(err, requester.ErrTimeout) {
			t.Fatalf("err = %v, want a timeout", err)
		}
		// Past the deadline and the clock skew the responder allows (real
		// time: the deadline travels as wall-clock time to a real server).
		time.Sleep(wire.DeadlineClockSkew + 200*time.Millisecond)

		var ran atomic.Int64
		res := serve(t, e.raw, q, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			ran.Add(1)
			if req.Body() == "given up" {
				t.Errorf("the handler ran for a request whose caller had given up")
			}
			return echo(ctx, req)
		})
		ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		m, err := r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("waiting")})
		if err != nil || aws.ToString(m.Body) != "echo waiting" {
			t.Fatalf("live request: %v, %v", m, err)
		}
		testtime.Until(20*time.Second, func() bool { return res.Stats().Dropped >= 1 })
		if s := res.Stats(); s.Dropped != 1 || ran.Load() != 1 {
			t.Fatalf("Dropped %d, handler runs %d; want 1 (expired) and 1", s.Dropped, ran.Load())
		}
	})
}
