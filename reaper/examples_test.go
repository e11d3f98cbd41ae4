package reaper_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// The examples run on the in-process emulator sqstest; in a program the
// client is an *sqs.Client, e.g. sqs.NewFromConfig(cfg).

// A process registers the temporary queues it owns with a Reaper, which
// keeps their heartbeat tags fresh and takes part in the fleet's sweeps.
func Example() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqsapi.DefaultQueuePrefix + "2f1c3f4e-8a1b-4c5d-9e6f-0a1b2c3d4e5f-0")})
	if err != nil {
		fmt.Println(err)
		return
	}
	hostQueueURL := aws.ToString(q.QueueUrl)

	// The first heartbeat is immediate, and asynchronous: the example
	// watches for its TagQueue call.
	watched := tagWatch{Client: client, tagged: make(chan struct{}, 1)}
	r, err := reaper.New(watched, func(o *reaper.Options) {
		o.DisableSweeping = true // this example shows heartbeats only
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := r.Add(hostQueueURL, 5*time.Minute); err != nil {
		fmt.Println(err)
		return
	}
	<-watched.tagged
	out, err := client.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(hostQueueURL)})
	if err != nil {
		fmt.Println(err)
		return
	}
	tags := out.Tags
	r.Remove(hostQueueURL) // before deleting the queue
	if err := r.Close(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println(sqsapi.RetentionTag, "=", tags[sqsapi.RetentionTag])
	// Output:
	// __IdleQueueRetentionPeriodSeconds = 300
}

// tagWatch is a client that says when a TagQueue call has returned.
type tagWatch struct {
	sqsapi.Client
	tagged chan struct{}
}

func (w tagWatch) TagQueue(ctx context.Context, in *sqs.TagQueueInput, optFns ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	out, err := w.Client.TagQueue(ctx, in, optFns...)
	select {
	case w.tagged <- struct{}{}:
	default:
	}
	return out, err
}

// A one-off sweep, as an operator's command would run it.
func ExampleSweeper_Sweep() {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	p := sqsapi.DefaultQueuePrefix
	now := time.Now()
	for _, q := range []struct {
		name     string
		tags     map[string]string
		messages int
	}{
		{p + "0b6a3c52-5d1e-4f7a-8b9c-1d2e3f4a5b6c-0", javaTags(300, now.Add(-time.Hour)), 3}, // dead requester
		{p + "7e8f9a0b-1c2d-4e3f-8a5b-6c7d8e9f0a1b-0", javaTags(300, now), 0},                 // live requester
		{p + "orders-temp", javaTags(60, now.Add(-time.Hour)), 1},                             // idle, not empty
		{p + "plain", nil, 0}, // not temporary
	} {
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(q.name), Tags: q.tags})
		if err != nil {
			fmt.Println(err)
			return
		}
		for range q.messages {
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: out.QueueUrl, MessageBody: aws.String("m")}); err != nil {
				fmt.Println(err)
				return
			}
		}
	}

	s, err := reaper.NewSweeper(client)
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := s.Sweep(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("listed %d, deleted %d, kept %d, errors %d\n", rep.Listed, len(rep.Deleted), rep.Kept, len(rep.Errors))
	// Output:
	// listed 4, deleted 1, kept 3, errors 0
}

// javaTags are the tags the Java client (and a Reaper) gives a temporary
// queue: its retention in seconds and its last heartbeat.
func javaTags(retentionSeconds int, heartbeat time.Time) map[string]string {
	return map[string]string{
		sqsapi.RetentionTag: strconv.Itoa(retentionSeconds),
		sqsapi.HeartbeatTag: strconv.FormatInt(heartbeat.UnixMilli(), 10),
	}
}
