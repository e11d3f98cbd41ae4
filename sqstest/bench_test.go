package sqstest_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/sqstestenv"
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
