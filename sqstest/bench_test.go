package sqstest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqstest"
)

// BenchmarkCycle measures sequential SendMessage + ReceiveMessage +
// DeleteMessage cycles, the figure the emulator survey used, on sqstest and
// on fauxqs in one run:
//
//	go test -run '^$' -bench Cycle ./sqstest/
//
// cycles/s = 1e9 / ns/op; both servers share the machine with the client.
//
// "sqstest" uses Server.Client, which calls the server in process;
// "sqstest-tcp" uses the same TCP client setup as "fauxqs".
func BenchmarkCycle(b *testing.B) {
	for _, kind := range []string{"sqstest", "sqstest-tcp", "fauxqs"} {
		b.Run(kind, func(b *testing.B) {
			var c *sqs.Client
			switch kind {
			case "sqstest":
				c = sqstestenv.SQSTest(b).Server.Client()
			case "sqstest-tcp":
				c, _ = sqstestenv.SQSTest(b).Client(b)
			default:
				c, _ = sqstestenv.Fauxqs(b).Client(b)
			}
			ctx := context.Background()
			out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(b, "bench"))})
			if err != nil {
				b.Fatal(err)
			}
			url := out.QueueUrl
			defer c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: url})
			body := aws.String("benchmark message body")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: body}); err != nil {
					b.Fatal(err)
				}
				r, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url})
				if err != nil || len(r.Messages) != 1 {
					b.Fatalf("receive: %v, %d messages", err, len(r.Messages))
				}
				if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: r.Messages[0].ReceiptHandle}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
		})
	}
}

// BenchmarkDataDir compares Options.DataDir (tempq emulator --data: every
// change on disk, fsync, before its answer) with memory only, over TCP, for
// one sender and for 16 concurrent ones, whose changes share fsyncs:
//
//	go test -run '^$' -bench DataDir ./sqstest/
func BenchmarkDataDir(b *testing.B) {
	for _, store := range []string{"memory", "datadir"} {
		for _, senders := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/senders=%d", store, senders), func(b *testing.B) {
				c, _ := sqstestenv.SQSTest(b, func(o *sqstest.Options) {
					if store == "datadir" {
						o.DataDir = b.TempDir()
					}
				}).Client(b)
				ctx := context.Background()
				out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bench")})
				if err != nil {
					b.Fatal(err)
				}
				body := aws.String("benchmark message body")
				send := func() {
					if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: out.QueueUrl, MessageBody: body}); err != nil {
						b.Error(err)
					}
				}
				b.ResetTimer()
				if senders == 1 {
					for i := 0; i < b.N; i++ {
						send()
					}
				} else {
					b.SetParallelism(max(1, senders/runtime.GOMAXPROCS(0)))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							send()
						}
					})
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
			})
		}
	}
}

// BenchmarkReceiveInFlight compares a receive on an empty standard queue
// with one on a queue holding 100,000 messages in flight and one visible:
// in-flight messages wait in a heap a receive does not walk, so the two
// cost about the same:
//
//	go test -run '^$' -bench ReceiveInFlight ./sqstest/
func BenchmarkReceiveInFlight(b *testing.B) {
	for _, inFlight := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("inflight=%d", inFlight), func(b *testing.B) {
			srv := sqstest.Start(b)
			c := srv.Client()
			ctx := context.Background()
			q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("busy"),
				Attributes: map[string]string{"VisibilityTimeout": "0"}})
			if err != nil {
				b.Fatal(err)
			}
			seedInFlight(b, srv, "busy", inFlight)
			if err := srv.Seed("busy", sqstest.Message{Body: "visible"}); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				// The queue's VisibilityTimeout 0 leaves the message
				// visible for the next round.
				out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl})
				if err != nil || len(out.Messages) != 1 {
					b.Fatalf("receive: %v, %d messages", err, len(out.Messages))
				}
			}
		})
	}
}

func seedInFlight(b *testing.B, srv *sqstest.Server, queue string, n int) {
	b.Helper()
	body := strings.Repeat("m", 200)
	batch := make([]sqstest.Message, 0, 1000)
	until := time.Now().Add(time.Hour) // the server runs on real time
	for i := 0; i < n; i++ {
		batch = append(batch, sqstest.Message{Body: body, ReceiveCount: 1, VisibleAt: until})
		if len(batch) == cap(batch) || i == n-1 {
			if err := srv.Seed(queue, batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// BenchmarkCompactionPause measures what an online compaction of the
// journal (Options.DataDir, tempq emulator --data) costs the requests that
// arrive while it runs: the time it holds the server's lock to copy the
// state of 100,000 live messages of 200 bytes (it encodes and writes them
// after releasing it):
//
//	go test -run '^$' -bench CompactionPause -benchtime 20x ./sqstest/
//
// ns/op is the pause; "full-ms" is a whole compaction in the background,
// from the copy to the renamed, synced file.
func BenchmarkCompactionPause(b *testing.B) {
	const live = 100_000
	srv := sqstest.Start(b, func(o *sqstest.Options) { o.DataDir = b.TempDir() })
	if _, err := srv.Client().CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("live")}); err != nil {
		b.Fatal(err)
	}
	seedInFlight(b, srv, "live", live/2)
	body := strings.Repeat("v", 200)
	for i := 0; i < live/2; i += 1000 {
		batch := make([]sqstest.Message, 1000)
		for j := range batch {
			batch[j].Body = body
		}
		if err := srv.Seed("live", batch...); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if n := sqstest.CaptureForCompaction(srv); n < live {
			b.Fatalf("captured %d records", n)
		}
	}
	b.StopTimer()
	start := time.Now()
	sqstest.Compact(srv)
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "full-ms")
}
