package sqstest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqstest"
)

// Zero values mean the documented defaults: an empty Region and AccountID
// are us-east-1 and 000000000000. The server listens on a free loopback
// port, not on every interface.
func TestZeroOptionsMeanDefaults(t *testing.T) {
	ctx := context.Background()
	srv := sqstest.NewServer(func(o *sqstest.Options) { o.Region, o.AccountID = "", "" })
	defer srv.Close(ctx)
	if u := srv.URL(); !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Errorf("URL %s, want a loopback address", u)
	}
	client := srv.Client()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("zero")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(aws.ToString(q.QueueUrl), "/000000000000/zero") {
		t.Errorf("queue URL %s, want the default account", aws.ToString(q.QueueUrl))
	}
	a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Attributes["QueueArn"]; got != "arn:aws:sqs:us-east-1:000000000000:zero" {
		t.Errorf("ARN %q, want the default region and account", got)
	}
}
