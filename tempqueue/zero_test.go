package tempqueue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
	"github.com/tempqueues/tempqueues/tempqueue"
)

// Zero values mean the documented defaults: an empty Prefix and a zero
// IdleQueueRetention (rejected by New before) give host queues with the
// default prefix and a virtual queue the default retention.
func TestZeroOptionsMeanDefaults(t *testing.T) {
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	c, err := tempqueue.New(srv.Client(), func(o *tempqueue.Options) {
		o.Prefix, o.IdleQueueRetention, o.DisableSweeping = "", 0, true
	})
	if err != nil {
		t.Fatalf("New with zero options: %v", err)
	}
	defer c.Close(ctx)
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("scratch")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(aws.ToString(q.QueueUrl), "/"+sqsapi.DefaultQueuePrefix) {
		t.Errorf("queue %s is not on a host queue with the default prefix", aws.ToString(q.QueueUrl))
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	if got := attrs.Attributes[sqsapi.IdleQueueRetentionPeriodAttribute]; got != "300" {
		t.Errorf("retention %q, want the default 300", got)
	}
}
