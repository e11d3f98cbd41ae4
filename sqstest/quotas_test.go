package sqstest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqstest"
)

// noRetries makes a client report the first throttling error instead of
// retrying it.
func noRetries(o *sqs.Options) { o.RetryMaxAttempts = 1 }

// The tagging quota admits a burst of one second's worth, throttles the
// rest with RequestThrottled, refills by the server's clock, and leaves
// other actions alone.
func TestTaggingQuotaThrottlesAndRefills(t *testing.T) {
	clock := sqstest.NewClock(time.Time{})
	srv := sqstest.Start(t, func(o *sqstest.Options) {
		o.Clock = clock
		o.Quotas = []sqstest.Quota{{}} // SQS's tagging quota
	})
	c := srv.Client(noRetries)
	ctx := context.Background()
	url := newQueue(t, c, "tagged", nil)
	tag := func() error {
		_, err := c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: &url, Tags: map[string]string{"k": "v"}})
		return err
	}
	list := func() error {
		_, err := c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &url})
		return err
	}
	for i := range 30 {
		call := tag
		if i%2 == 1 {
			call = list // the actions share one bucket
		}
		if err := call(); err != nil {
			t.Fatalf("call %d of the burst: %v", i, err)
		}
	}
	err := list()
	var rt *types.RequestThrottled
	if !errors.As(err, &rt) {
		t.Fatalf("call beyond the burst: got %v, want *types.RequestThrottled", err)
	}
	// Other actions are not limited.
	if _, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(100 * time.Millisecond) // 3 tokens at 30/s
	for i := range 3 {
		if err := tag(); err != nil {
			t.Fatalf("call %d after 100ms: %v", i, err)
		}
	}
	if err := tag(); !errors.As(err, &rt) {
		t.Fatalf("fourth call after 100ms: got %v, want throttled", err)
	}
	got, calls := srv.Throttled(), srv.Calls()
	if got["ListQueueTags"] != 1 || got["TagQueue"] != 1 || got["UntagQueue"] != 0 ||
		calls["TagQueue"] != 19 || calls["ListQueueTags"] != 16 {
		t.Errorf("Throttled = %v, Calls = %v", got, calls)
	}
	if _, ok := got["UntagQueue"]; !ok {
		t.Errorf("Throttled leaves out an action under a quota: %v", got)
	}
	if _, ok := got["GetQueueAttributes"]; ok {
		t.Errorf("Throttled lists an action under no quota: %v", got)
	}
}

// A quota of one action, with its own rate and burst, leaves the other
// tagging actions free; a server without quotas throttles nothing.
func TestQuotaPerAction(t *testing.T) {
	clock := sqstest.NewClock(time.Time{})
	srv := sqstest.Start(t, func(o *sqstest.Options) {
		o.Clock = clock
		o.Quotas = []sqstest.Quota{
			{Actions: []string{"TagQueue"}, Rate: 2, Burst: 1},
			{Actions: []string{"PurgeQueue"}, Rate: -1},
		}
	})
	c := srv.Client(noRetries)
	ctx := context.Background()
	url := newQueue(t, c, "q", nil)
	tag := func() error {
		_, err := c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: &url, Tags: map[string]string{"k": "v"}})
		return err
	}
	if err := tag(); err != nil {
		t.Fatal(err)
	}
	if err := tag(); err == nil {
		t.Fatal("second TagQueue within the burst of 1 was admitted")
	}
	for range 50 {
		if _, err := c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &url}); err != nil {
			t.Fatalf("ListQueueTags under no quota: %v", err)
		}
	}
	clock.Advance(500 * time.Millisecond)
	if err := tag(); err != nil {
		t.Fatalf("TagQueue after a refill of one token: %v", err)
	}
	var rt *types.RequestThrottled
	if _, err := c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &url}); !errors.As(err, &rt) {
		t.Fatalf("PurgeQueue under a negative rate: %v, want throttled", err)
	}

	free := sqstest.Start(t).Client(noRetries)
	u := newQueue(t, free, "q", nil)
	for range 100 {
		if _, err := free.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &u}); err != nil {
			t.Fatalf("a server without quotas throttled: %v", err)
		}
	}
}

// With SQS's tagging quota on, a burst of TagQueue calls beyond 30 is
// throttled as SQS throttles it.
func ExampleQuota() {
	srv := sqstest.NewServer(func(o *sqstest.Options) { o.Quotas = []sqstest.Quota{{}} })
	defer srv.Close(context.Background())
	client := srv.Client(func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	ctx := context.Background()
	q, _ := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("tagged")})

	throttled := 0
	for range 40 {
		_, err := client.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: q.QueueUrl, Tags: map[string]string{"team": "a"}})
		var rt *types.RequestThrottled
		if errors.As(err, &rt) {
			throttled++
		}
	}
	fmt.Println(throttled > 0, srv.Throttled()["TagQueue"] == int64(throttled))
	// Output: true true
}
