package requester_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/testkit/rpcbench"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqstest"
)

// streamLen is the number of replies of a benchmarked stream: 99 partial
// ones and the final one.
const streamLen = 100

// streamer runs one stream of streamLen replies and reports the gaps
// between consecutive replies.
type streamer func(ctx context.Context, gaps []time.Duration) error

// BenchmarkStream measures streams of 100 replies per request at 1, 8 and
// 64 concurrent streams on the in-process sqstest server: tempqueues
// (SendMessageAndStream against Serve and Request.Send) and a careful
// hand-written static reply queue with correlation ids and sequence
// numbers (batched sends of 10, four reply pollers, one batched delete per
// receive). One op is one stream; it reports replies/s, API calls per
// reply (both sides, empty receives included), the p99 gap between
// consecutive replies of a stream and, on unix, the process's CPU time per
// reply (client, server and both ends: what a shared machine's load does
// not change much).
//
//	go test -run '^$' -bench 'BenchmarkStream$' -benchtime 200x ./requester
func BenchmarkStream(b *testing.B) { benchmarkStream(b, 0) }

// BenchmarkStreamSQSLatency is BenchmarkStream with 10 ms added to every
// call, about what a call to SQS takes from the same region: what the
// number of calls in flight is worth there.
//
//	go test -run '^$' -bench BenchmarkStreamSQSLatency -benchtime 200x ./requester
func BenchmarkStreamSQSLatency(b *testing.B) { benchmarkStream(b, 10*time.Millisecond) }

func benchmarkStream(b *testing.B, latency time.Duration) {
	be := benchBackend(b, latency)
	for _, name := range []string{"tempqueues", "static-reply-queue"} {
		for _, streams := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/streams=%d", name, streams), func(b *testing.B) {
				client, counter := be.Client(b)
				var run streamer
				if name == "tempqueues" {
					run = tempQueuesStreamer(b, client)
				} else {
					run = staticStreamer(b, client)
				}
				benchStreams(b, run, streams, counter.Total, counter.Reset)
			})
		}
	}
}

// benchBackend returns a benchmark's in-process sqstest server, waiting
// latency before every call when it is positive: a stand-in for SQS's
// round trip.
func benchBackend(b *testing.B, latency time.Duration) *sqstestenv.Backend {
	be := sqstestenv.SQSTest(b)
	if latency > 0 {
		be.Server.InjectFault(sqstest.Latency("", latency, 0))
	}
	return be
}

// benchService serves h on a new queue of client until the benchmark
// ends, with a handler for each of the benchmarks' 64 callers, and returns
// the queue's URL and a requester on the same client: the client's counter
// counts the calls of both sides.
func benchService(b *testing.B, client *sqs.Client, h responder.Handler) (string, *requester.Requester) {
	ctx := context.Background()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(b, "bench"))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	resp, err := responder.New(client, func(o *responder.Options) { o.MaxConcurrency = 64; o.PollWaitTime = time.Second })
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- resp.Serve(ctx, *q.QueueUrl, h)
	}()
	r, err := requester.New(client, func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = resp.Shutdown(sctx)
		<-served
		_ = r.Close(sctx)
	})
	return *q.QueueUrl, r
}

func benchStreams(b *testing.B, run streamer, streams int, calls func() int64, reset func()) {
	if err := run(context.Background(), make([]time.Duration, streamLen)); err != nil { // warm up: host queue, pollers
		b.Fatal(err)
	}
	reset()
	var (
		mu   sync.Mutex
		all  []time.Duration
		gaps = make([][]time.Duration, streams)
	)
	for i := range gaps {
		gaps[i] = make([]time.Duration, streamLen)
	}
	b.ResetTimer()
	cpu0 := rpcbench.ProcessCPU()
	rpcbench.RunOps(b, streams, func(ctx context.Context, w int) error {
		if err := run(ctx, gaps[w]); err != nil {
			return err
		}
		mu.Lock()
		all = append(all, gaps[w][1:]...)
		mu.Unlock()
		return nil
	})
	b.StopTimer()
	replies := float64(b.N * streamLen)
	if cpu := rpcbench.ProcessCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/replies, "cpu-us/reply")
	}
	b.ReportMetric(replies/b.Elapsed().Seconds(), "replies/s")
	b.ReportMetric(float64(calls())/replies, "calls/reply")
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(rpcbench.PercentileMs(all, 99), "p99-gap-ms")
	}
}

// tempQueuesStreamer is a requester streaming from a responder whose
// handler sends 99 replies and returns the last.
func tempQueuesStreamer(b *testing.B, client *sqs.Client) streamer {
	q, r := benchService(b, client, streamHandler(streamLen-1, 0))
	return func(ctx context.Context, gaps []time.Duration) error {
		s, err := r.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("job")})
		if err != nil {
			return err
		}
		n, last := 0, time.Now()
		for _, err := range s.All(ctx) {
			if err != nil {
				return err
			}
			now := time.Now()
			gaps[n], last = now.Sub(last), now
			n++
		}
		if n != streamLen {
			return fmt.Errorf("stream of %d replies, want %d", n, streamLen)
		}
		return nil
	}
}

// staticStreamer is the hand-written contender: requests carry a reply
// queue URL and a correlation id; a worker answers each with 100 replies
// carrying the correlation id and a sequence number, sent 10 per
// SendMessageBatch; the caller's four reply pollers route replies by
// correlation id, delete each receive's replies with one
// DeleteMessageBatch, and each stream puts its replies back in order.
func staticStreamer(b *testing.B, client *sqs.Client) streamer {
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	b.Cleanup(func() { cancel(); loops.Wait() })
	create := func(kind string) string {
		q, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(b, kind))})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
		return *q.QueueUrl
	}
	requests, replies := create("static-req"), create("static-rep")
	const corr, seqAttr, replyTo = "CorrelationId", "Seq", "ReplyTo"
	receive := func(queue string) []types.Message {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queue), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			return nil
		}
		return out.Messages
	}
	deleteAll := func(queue string, msgs []types.Message) {
		in := &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queue)}
		for i, m := range msgs {
			in.Entries = append(in.Entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		_, _ = client.DeleteMessageBatch(context.Background(), in)
	}
	// The worker: pollers as many as a 64-handler responder would run.
	for range 4 {
		loops.Add(1)
		go func() {
			defer loops.Done()
			for ctx.Err() == nil {
				msgs := receive(requests)
				var wg sync.WaitGroup
				for _, m := range msgs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						to, id := m.MessageAttributes[replyTo], m.MessageAttributes[corr]
						for start := 0; start < streamLen; start += 10 {
							in := &sqs.SendMessageBatchInput{QueueUrl: to.StringValue}
							for i := start; i < start+10; i++ {
								in.Entries = append(in.Entries, types.SendMessageBatchRequestEntry{
									Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String("part " + strconv.Itoa(i)),
									MessageAttributes: map[string]types.MessageAttributeValue{corr: id, seqAttr: wire.StringAttribute(strconv.Itoa(i))},
								})
							}
							if _, err := client.SendMessageBatch(context.Background(), in); err != nil {
								b.Error(err)
							}
						}
					}()
				}
				wg.Wait()
				if len(msgs) > 0 {
					deleteAll(requests, msgs)
				}
			}
		}()
	}
	// The caller's reply pollers.
	var mu sync.Mutex
	waiting := make(map[string]chan types.Message)
	for range 4 {
		loops.Add(1)
		go func() {
			defer loops.Done()
			for ctx.Err() == nil {
				msgs := receive(replies)
				for _, m := range msgs {
					mu.Lock()
					ch := waiting[aws.ToString(m.MessageAttributes[corr].StringValue)]
					mu.Unlock()
					if ch != nil {
						ch <- m
					}
				}
				if len(msgs) > 0 {
					deleteAll(replies, msgs)
				}
			}
		}()
	}
	return func(ctx context.Context, gaps []time.Duration) error {
		id := uuid.NewString()
		ch := make(chan types.Message, 2*streamLen)
		mu.Lock()
		waiting[id] = ch
		mu.Unlock()
		defer func() {
			mu.Lock()
			delete(waiting, id)
			mu.Unlock()
		}()
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{
			QueueUrl: aws.String(requests), MessageBody: aws.String("job"),
			MessageAttributes: map[string]types.MessageAttributeValue{replyTo: wire.StringAttribute(replies), corr: wire.StringAttribute(id)},
		}); err != nil {
			return err
		}
		held := make(map[int]bool)
		next, last := 0, time.Now()
		for next < streamLen {
			select {
			case m := <-ch:
				seq, _ := strconv.Atoi(aws.ToString(m.MessageAttributes[seqAttr].StringValue))
				if seq < next || held[seq] {
					continue // a duplicate
				}
				held[seq] = true
				for held[next] {
					delete(held, next)
					now := time.Now()
					gaps[next], last = now.Sub(last), now
					next++
				}
			case <-ctx.Done():
				return errors.New("static reply queue: stream timed out")
			}
		}
		return nil
	}
}
