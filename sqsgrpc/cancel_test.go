package sqsgrpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsgrpc"
)

// watchForever answers Watch with one status, then waits for its context,
// and tells when and why it ended.
type watchForever struct {
	healthpb.UnimplementedHealthServer
	ended chan error
}

func (w *watchForever) Watch(_ *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
		return err
	}
	<-stream.Context().Done()
	w.ended <- context.Cause(stream.Context())
	return stream.Context().Err()
}

// A server-streaming call ended by its caller, by cancelling or at its
// deadline, ends the handler's context within about one round trip: a
// cancel by a message to the session, the deadline by the handler's own,
// which ends just before the caller's. The cancelled request is finished
// as a drop ("cancelled"), the other as handled (its status goes back),
// neither as a failure, and neither is received again.
func TestCancellationReachesTheServer(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		var rec observetest.Recorder
		w := &watchForever{ended: make(chan error, 2)}
		srv := sqsgrpc.NewServer()
		healthpb.RegisterHealthServer(srv, w)
		raw, queue, prefix := serve(t, b, srv, func(o *responder.Options) { o.Observer = &rec })
		client := healthpb.NewHealthClient(sqsgrpc.NewClientConn(newRequester(t, raw, prefix), queue))

		for _, end := range []string{"cancel", "deadline"} {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "orders"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != nil {
				t.Fatalf("%s: first status: %v", end, err)
			}
			ended := time.Now()
			if end == "cancel" {
				cancel()
			} else {
				_, err := stream.Recv() // until the deadline
				t.Logf("%s: the caller's stream ended with %v", end, err)
				ended = time.Now()
			}
			select {
			case cause := <-w.ended:
				t.Logf("%s: the handler's context ended %v later, cause %v", end, time.Since(ended), cause)
				if d := time.Since(ended); d > 1500*time.Millisecond {
					t.Errorf("%s: the handler heard %v after the caller ended", end, d)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: the handler's context never ended", end)
			}
			cancel()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Both handlers ran to their end (Handled); the cancelled one's
		// request is then dropped, the other's status is sent.
		if !rec.Wait(ctx, observe.Handled, "", 2) || !rec.Wait(ctx, observe.Dropped, "cancelled", 1) {
			t.Fatalf("want both handled and the cancelled request dropped as cancelled; events: %v", rec.Events())
		}
		for _, e := range rec.Events() {
			if e.Kind == observe.Released {
				t.Errorf("a request was released: %+v", e)
			}
		}
		// Deleted, not left to come back.
		for {
			out, err := raw.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queue),
				AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
			if err != nil {
				t.Fatal(err)
			}
			if out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0" {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the request queue still holds %v", out.Attributes)
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}
