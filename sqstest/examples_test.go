package sqstest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqstest"
)

// A server, a queue, and one message sent, received and deleted. In a test,
// sqstest.Start(t) does what NewServer and Close do here.
func ExampleNewServer() {
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	client := srv.Client()
	ctx := context.Background()

	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
	if err != nil {
		panic(err)
	}
	_, err = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("resize photo 42")})
	if err != nil {
		panic(err)
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 1})
	if err != nil {
		panic(err)
	}
	for _, m := range out.Messages {
		fmt.Println(*m.Body)
		_, _ = client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle})
	}
	// Output: resize photo 42
}

// A Clock the test moves expires a visibility timeout without sleeping: the
// message comes back, received twice.
func ExampleClock() {
	clock := sqstest.NewClock(time.Time{})
	srv := sqstest.NewServer(func(o *sqstest.Options) { o.Clock = clock })
	defer srv.Close(context.Background())
	client := srv.Client()
	ctx := context.Background()

	q, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("work"),
		Attributes: map[string]string{"VisibilityTimeout": "30"}})
	_, _ = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("task")})

	receive := func() []types.Message {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
		if err != nil {
			panic(err)
		}
		return out.Messages
	}
	fmt.Println("first receive:", len(receive()))
	fmt.Println("while in flight:", len(receive()))
	clock.Advance(30 * time.Second)
	again := receive()
	fmt.Println("after 30 s:", len(again), "receive count", again[0].Attributes["ApproximateReceiveCount"])
	// Output:
	// first receive: 1
	// while in flight: 0
	// after 30 s: 1 receive count 2
}

// Inject throttling into the next two SendMessage calls and watch the SDK
// retry them: the third attempt succeeds and the server counts all three.
func ExampleServer_InjectFault() {
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	// The SDK's standard retryer (3 attempts), its backoff capped so the
	// example runs fast.
	client := srv.Client(func(o *sqs.Options) {
		o.Retryer = retry.AddWithMaxBackoffDelay(retry.NewStandard(), 10*time.Millisecond)
	})
	ctx := context.Background()
	q, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("busy")})

	srv.InjectFault(sqstest.Fail("SendMessage", "RequestThrottled").Times(2))

	_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m")})
	fmt.Println("error:", err)
	fmt.Println("SendMessage calls:", srv.Calls()["SendMessage"])

	// Without retries the throttling error surfaces, typed.
	srv.InjectFault(sqstest.Fail("SendMessage", "RequestThrottled"))
	noRetry := srv.Client(func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	_, err = noRetry.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m")})
	var throttled *types.RequestThrottled
	fmt.Println("throttled:", errors.As(err, &throttled))
	// Output:
	// error: <nil>
	// SendMessage calls: 3
	// throttled: true
}

// Count the API calls a piece of code makes: here, an empty short poll and
// a long poll that a waiting message ends at once each cost one
// ReceiveMessage.
func ExampleServer_Calls() {
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	client := srv.Client()
	ctx := context.Background()
	q, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("calls")})

	_, _ = client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl})
	_, _ = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m")})
	_, _ = client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 20})
	fmt.Println(srv.Calls())
	// Output: map[CreateQueue:1 ReceiveMessage:2 SendMessage:1]
}

// Seed a queue directly, then let the code under test (here, one receive)
// consume it: one message ready, one already received twice and in flight
// for another 30 s.
func ExampleServer_Seed() {
	clock := sqstest.NewClock(time.Time{})
	srv := sqstest.NewServer(func(o *sqstest.Options) { o.Clock = clock })
	defer srv.Close(context.Background())
	client := srv.Client()
	ctx := context.Background()
	q, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")})

	err := srv.Seed("jobs",
		sqstest.Message{Body: "ready", Attributes: map[string]types.MessageAttributeValue{
			"kind": {DataType: aws.String("String"), StringValue: aws.String("resize")}}},
		sqstest.Message{Body: "retrying", ReceiveCount: 2, VisibleAt: clock.Now().Add(30 * time.Second)},
	)
	if err != nil {
		panic(err)
	}
	out, _ := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10,
		MessageAttributeNames: []string{"All"}})
	for _, m := range out.Messages {
		fmt.Println(*m.Body, *m.MessageAttributes["kind"].StringValue)
	}
	// Output: ready resize
}

// Peek at a queue after the code under test ran: which messages are in
// flight, how often they were received, and when they come back.
func ExampleServer_Messages() {
	clock := sqstest.NewClock(time.Time{})
	srv := sqstest.NewServer(func(o *sqstest.Options) { o.Clock = clock })
	defer srv.Close(context.Background())
	client := srv.Client()
	ctx := context.Background()
	q, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("work"),
		Attributes: map[string]string{"VisibilityTimeout": "30"}})
	for _, body := range []string{"a", "b"} {
		_, _ = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body)})
	}
	_, _ = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("c"), DelaySeconds: 60})
	_, _ = client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl}) // takes "a", never deletes it

	msgs, err := srv.Messages(*q.QueueUrl)
	if err != nil {
		panic(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s: received %d times", m.Body, m.ReceiveCount)
		if wait := m.VisibleAt.Sub(clock.Now()); wait > 0 {
			fmt.Printf(", hidden for %v", wait) // in flight if received, else delayed
		}
		fmt.Println()
	}
	// Output:
	// b: received 0 times
	// c: received 0 times, hidden for 1m0s
	// a: received 1 times, hidden for 30s
}

// List the queues the code under test created, with their attributes and
// tags.
func ExampleServer_QueueURLs() {
	srv := sqstest.NewServer()
	defer srv.Close(context.Background())
	client := srv.Client()
	ctx := context.Background()
	_, _ = client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders"),
		Tags: map[string]string{"team": "billing"}})
	_, _ = client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders-dlq")})

	for _, url := range srv.QueueURLs() {
		attrs, _ := srv.QueueAttributes(url)
		tags, _ := srv.QueueTags(url)
		fmt.Println(strings.TrimPrefix(url, srv.URL()), attrs["VisibilityTimeout"], tags)
	}
	// Output:
	// /000000000000/orders 30 map[team:billing]
	// /000000000000/orders-dlq 30 map[]
}

// With Options.DataDir a server keeps its queues and messages on disk: a
// new server on the same directory (after a restart, or a crash) has
// everything the last one acknowledged. `tempq emulator --data DIR` runs
// it so.
func ExampleOptions_dataDir() {
	dir, err := os.MkdirTemp("", "sqstest-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	persist := func(o *sqstest.Options) { o.DataDir = dir }

	srv := sqstest.NewServer(persist)
	q, _ := srv.Client().CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs"),
		Tags: map[string]string{"team": "imaging"}})
	_, _ = srv.Client().SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("resize photo 42")})
	_ = srv.Close(ctx)

	srv = sqstest.NewServer(persist)
	defer srv.Close(ctx)
	msgs, _ := srv.Messages("jobs")
	tags, _ := srv.QueueTags("jobs")
	fmt.Println(msgs[0].Body, tags["team"])
	// Output: resize photo 42 imaging
}
