package console

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// fleetScene is a fleet's temporary queues as the reaper leaves them: a
// live host queue, a due one, and the sweeper lease held.
type fleetScene struct {
	prefix, owner, live, due string
}

// tagHeartbeat tags a queue as a Reaper does: 300 s retention, heartbeat at.
func tagHeartbeat(t *testing.T, c *sqs.Client, url string, at time.Time) {
	t.Helper()
	if _, err := c.TagQueue(context.Background(), &sqs.TagQueueInput{QueueUrl: aws.String(url), Tags: map[string]string{
		sqsapi.RetentionTag: "300", sqsapi.HeartbeatTag: strconv.FormatInt(at.UnixMilli(), 10),
	}}); err != nil {
		t.Fatal(err)
	}
}

func newFleetScene(t *testing.T, c *sqs.Client) fleetScene {
	t.Helper()
	ctx := context.Background()
	s := fleetScene{prefix: sqsapi.DefaultQueuePrefix}
	s.owner = s.prefix + "3f2c9a4e-8b1d-4c6f-9e2a-7d5b1c0a9f3e"
	s.live, s.due = s.owner+"-0", s.prefix+"b7e1d2c3-4a5b-4c6d-8e7f-901a2b3c4d5e-0"
	tagHeartbeat(t, c, createQueue(t, c, s.live, nil), time.Now().Add(-90*time.Second))
	tagHeartbeat(t, c, createQueue(t, c, s.due, nil), time.Now().Add(-7*time.Minute))
	// The lease: its token taken by a process until the next window.
	lease := createQueue(t, c, reaper.LeaseQueueName(""), map[string]string{"FifoQueue": "true"})
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(lease), MessageBody: aws.String("tempqueues-reaper-lease/1"),
		MessageGroupId: aws.String("lease"), MessageDeduplicationId: aws.String("scene")}); err != nil {
		t.Fatal(err)
	}
	hide := int32(time.Until(reaper.NextSweepWindow(time.Now(), 0)).Seconds()) + 1
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(lease), VisibilityTimeout: hide})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("taking the lease token: %v, %d messages", err, len(out.Messages))
	}
	return s
}
