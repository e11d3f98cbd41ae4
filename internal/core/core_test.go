package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/core"
	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/sqstest"
)

// The wiring the core holds once: a host queue deleted from under it is
// found by the reaper's heartbeat, the owner forgets it, the user's
// observer hears of it, and the next use creates a new queue; Close
// deletes what it owns.
func TestGoneQueueIsForgottenAndRecreated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := sqstest.NewServer()
	defer func() { _ = srv.Close(context.Background()) }()
	client := srv.Client()
	var rec observetest.Recorder
	var forgotten []string
	c, err := core.New("test", client, core.Options{
		Prefix:          "coretest_",
		Retention:       3 * time.Second, // heartbeats every second
		DisableSweeping: true,
		Reaper:          []func(*reap.Config){func(rc *reap.Config) { rc.Observer = &rec }},
		OnGone:          func(url string) { forgotten = append(forgotten, url) },
	})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.URL(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.URL(ctx, nil); err != nil || again != first {
		t.Fatalf("second use: %q, %v; want the same queue %q", again, err, first)
	}
	if _, err := client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(first)}); err != nil {
		t.Fatal(err)
	}
	if !rec.Wait(ctx, observe.QueueGone, "", 1) {
		t.Fatal("the reaper never told of the deleted queue")
	}
	if e := rec.Events()[0]; e.Queue != first || !isGone(e.Err) {
		t.Errorf("event %+v, want QueueGone for %s with QueueDoesNotExist", e, first)
	}
	second, err := c.URL(ctx, nil)
	if err != nil || second == first {
		t.Fatalf("after the delete: %q, %v; want a new queue", second, err)
	}
	if len(forgotten) != 1 || forgotten[0] != first {
		t.Errorf("OnGone saw %q, want %q", forgotten, first)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(second)}); !isGone(err) {
		t.Errorf("after Close the owned queue is there: %v", err)
	}
}

func isGone(err error) bool {
	var gone *types.QueueDoesNotExist
	return errors.As(err, &gone)
}
