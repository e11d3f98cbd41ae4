package responder

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

type benchEnv struct {
	client     *sqs.Client // the requester side
	rclient    *sqs.Client // the responder's, counted
	counter    *callcount.Counter
	host, reqQ string
	responder  *Responder
	stopServe  context.CancelFunc
	served     sync.WaitGroup
}

func newBenchEnv(b *testing.B, concurrency int) *benchEnv {
	be := sqstestenv.Fauxqs(b)
	client, _ := be.Client(b)
	rclient, counter := be.Client(b)
	e := &benchEnv{client: client, rclient: rclient, counter: counter}
	ctx := context.Background()
	for _, q := range []*string{&e.host, &e.reqQ} {
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(b, "q"))})
		if err != nil {
			b.Fatal(err)
		}
		*q = aws.ToString(out.QueueUrl)
		b.Cleanup(func() { _, _ = client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	}
	r, err := New(rclient, func(o *Options) { o.MaxConcurrency = concurrency; o.PollWaitTime = time.Second })
	if err != nil {
		b.Fatal(err)
	}
	e.responder = r
	sctx, cancel := context.WithCancel(ctx)
	e.stopServe = cancel
	e.served.Add(1)
	go func() {
		defer e.served.Done()
		if err := r.Serve(sctx, e.reqQ, echo); err != nil {
			b.Error(err)
		}
	}()
	b.Cleanup(func() {
		cancel()
		e.served.Wait()
		_ = r.Shutdown(ctx)
	})
	return e
}

// drain receives and deletes n replies from the host queue, as a
// requester's poller would.
func (e *benchEnv) drain(b *testing.B, n int64, got *atomic.Int64) {
	ctx := context.Background()
	for got.Load() < n {
		out, err := e.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &e.host, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			b.Error(err)
			return
		}
		if len(out.Messages) == 0 {
			continue
		}
		del := &sqs.DeleteMessageBatchInput{QueueUrl: &e.host}
		for i, m := range out.Messages {
			del.Entries = append(del.Entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if _, err := e.client.DeleteMessageBatch(ctx, del); err != nil {
			b.Error(err)
			return
		}
		got.Add(int64(len(out.Messages)))
	}
}

// BenchmarkServeThroughput streams requests through Serve (64 handler
// slots) from 4 senders and reports requests served per second and the
// responder's API calls per request.
func BenchmarkServeThroughput(b *testing.B) {
	e := newBenchEnv(b, 64)
	ctx := context.Background()
	var got atomic.Int64
	n := int64(b.N)
	e.counter.Reset()
	b.ResetTimer()
	start := time.Now()
	var sent atomic.Int64
	var senders sync.WaitGroup
	for range 4 {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for {
				first := sent.Add(10) - 10
				if first >= n {
					return
				}
				in := &sqs.SendMessageBatchInput{QueueUrl: &e.reqQ}
				for i := first; i < min(n, first+10); i++ {
					in.Entries = append(in.Entries, types.SendMessageBatchRequestEntry{
						Id: aws.String(fmt.Sprint(i - first)), MessageBody: aws.String("ping"),
						MessageAttributes: map[string]types.MessageAttributeValue{
							sqsapi.ResponseQueueURLAttribute: wire.StringAttribute(fmt.Sprintf("%s#vq-%d", e.host, i%64)),
							sqsapi.RequestIDAttribute:        wire.StringAttribute(fmt.Sprint(i)),
						},
					})
				}
				if _, err := e.client.SendMessageBatch(ctx, in); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	e.drain(b, n, &got)
	senders.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(n)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(e.counter.Total())/float64(n), "calls/req")
}

// BenchmarkServeOneAtATime sends one request, waits for its reply, and
// repeats: ns/op is the round-trip latency through Serve.
func BenchmarkServeOneAtATime(b *testing.B) {
	e := newBenchEnv(b, 10)
	ctx := context.Background()
	e.counter.Reset()
	b.ResetTimer()
	for i := range b.N {
		if _, err := e.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &e.reqQ, MessageBody: aws.String("ping"),
			MessageAttributes: map[string]types.MessageAttributeValue{
				sqsapi.ResponseQueueURLAttribute: wire.StringAttribute(e.host + "#vq"),
				sqsapi.RequestIDAttribute:        wire.StringAttribute(fmt.Sprint(i)),
			}}); err != nil {
			b.Fatal(err)
		}
		var got atomic.Int64
		e.drain(b, 1, &got)
	}
	b.StopTimer()
	// Let the last delete land before counting.
	_ = e.responder.dels.Flush(ctx)
	b.ReportMetric(float64(e.counter.Total())/float64(b.N), "calls/req")
}
