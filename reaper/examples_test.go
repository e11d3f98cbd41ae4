package reaper_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// The examples run on an in-memory stand-in for SQS so that they need no
// server; in a program the client is an *sqs.Client, e.g.
// sqs.NewFromConfig(cfg).

// A process registers the temporary queues it owns with a Reaper, which
// keeps their heartbeat tags fresh and takes part in the fleet's sweeps.
func Example() {
	client := newMemSQS()
	hostQueueURL := client.add(sqsapi.DefaultQueuePrefix+"2f1c3f4e-8a1b-4c5d-9e6f-0a1b2c3d4e5f-0", nil, 0)

	r, err := reaper.New(client, func(o *reaper.Options) {
		o.DisableSweeping = true // this example shows heartbeats only
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := r.Add(hostQueueURL, sqsapi.DefaultIdleQueueRetention); err != nil {
		fmt.Println(err)
		return
	}
	for r.Stats().Heartbeats == 0 { // the first heartbeat is immediate
		time.Sleep(10 * time.Millisecond)
	}
	r.Remove(hostQueueURL) // before deleting the queue
	if err := r.Close(context.Background()); err != nil {
		fmt.Println(err)
	}

	tags := client.tagsOf(hostQueueURL)
	fmt.Println(sqsapi.RetentionTag, "=", tags[sqsapi.RetentionTag])
	_, hasHeartbeat := tags[sqsapi.HeartbeatTag]
	fmt.Println(sqsapi.HeartbeatTag, "set:", hasHeartbeat)
	// Output:
	// __IdleQueueRetentionPeriodSeconds = 300
	// __AmazonSQSIdleQueueDeletingClient.LastHeartbeatTimestamp set: true
}

// A one-off sweep, as an operator's command would run it.
func ExampleSweeper_Sweep() {
	client := newMemSQS()
	p := sqsapi.DefaultQueuePrefix
	now := time.Now()
	client.add(p+"0b6a3c52-5d1e-4f7a-8b9c-1d2e3f4a5b6c-0", javaTags(300, now.Add(-time.Hour)), 3) // dead requester
	client.add(p+"7e8f9a0b-1c2d-4e3f-8a5b-6c7d8e9f0a1b-0", javaTags(300, now), 0)                 // live requester
	client.add(p+"orders-temp", javaTags(60, now.Add(-time.Hour)), 1)                             // idle, not empty
	client.add(p+"plain", nil, 0)                                                                 // not temporary

	s, err := reaper.NewSweeper(client)
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := s.Sweep(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("listed %d, deleted %d, kept %d, errors %d\n", rep.Listed, len(rep.Deleted), rep.Kept, len(rep.Errors))
	// Output:
	// listed 4, deleted 1, kept 3, errors 0
}
