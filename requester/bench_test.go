package requester_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/responder"
)

// benchRoundTrips measures request/response round trips through one host
// queue against an echo responder on backend b, with the given number of
// concurrent callers, and reports the API calls per RPC (requester and
// responder together, empty receives included).
func benchRoundTrips(b *testing.B, be *sqstestenv.Backend, callers int) {
	client, counter := be.Client(b)
	ctx := context.Background()
	q, r := benchService(b, client, responder.HandlerFunc(func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
		return &responder.Reply{Body: req.Body()}, nil
	}))
	call := func() {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if _, err := r.SendMessageAndGetResponse(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("ping")}); err != nil {
			b.Error(err)
		}
	}
	call() // creates the host queue
	counter.Reset()
	b.SetParallelism(callers) // GOMAXPROCS × callers goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			call()
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(counter.Total())/float64(b.N), "calls/rpc")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rpc/s")
}

func BenchmarkRoundTrip(b *testing.B) {
	for _, be := range []*sqstestenv.Backend{sqstestenv.SQSTest(b), sqstestenv.Fauxqs(b)} {
		for _, callers := range []int{1, 32} {
			b.Run(be.Name+"/callers="+map[int]string{1: "1", 32: "32xGOMAXPROCS"}[callers], func(b *testing.B) {
				benchRoundTrips(b, be, callers)
			})
		}
	}
}
