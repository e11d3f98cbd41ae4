package requester_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// Zero values mean the documented defaults: an empty Prefix and a zero
// IdleQueueRetention, written out, make the same host queue as options
// left alone (New rejected both before).
func TestZeroOptionsMeanDefaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("nobody-answers")})
	if err != nil {
		t.Fatal(err)
	}
	r, err := requester.New(client, func(o *requester.Options) {
		o.Prefix, o.IdleQueueRetention, o.Timeout, o.PollWaitTime = "", 0, 0, 0
		o.DisableSweeping = true
	})
	if err != nil {
		t.Fatalf("New with zero options: %v", err)
	}
	defer r.Close(ctx)
	callCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := r.SendMessageAndGetResponse(callCtx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("hi")}); !errors.Is(err, requester.ErrTimeout) {
		t.Fatalf("call: %v, want a timeout", err)
	}
	hosts, err := client.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(sqsapi.DefaultQueuePrefix)})
	if err != nil || len(hosts.QueueUrls) != 1 {
		t.Fatalf("host queues with the default prefix: %v, %v", hosts, err)
	}
	tags, err := client.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &hosts.QueueUrls[0]})
	if err != nil {
		t.Fatal(err)
	}
	if got := tags.Tags[sqsapi.RetentionTag]; got != "300" {
		t.Errorf("host queue %s: retention tag %q, want the default 300", hosts.QueueUrls[0], got)
	}
	if !strings.Contains(hosts.QueueUrls[0], "/"+sqsapi.DefaultQueuePrefix) {
		t.Errorf("host queue %s lacks the default prefix", hosts.QueueUrls[0])
	}
}

// A request to a queue that does not exist fails naming the caller's
// operation and that queue, not the batch call the requester made
// ("operation error SQS: SendMessageBatch"), and still matches
// QueueDoesNotExist. So does a stream's.
func TestMissingRequestQueueIsNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	r, err := requester.New(srv.Client(), func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	missing := srv.URL() + "/000000000000/no-such-queue"
	_, err = r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(missing), MessageBody: aws.String("hi")})
	var gone *types.QueueDoesNotExist
	if !errors.As(err, &gone) || !strings.HasPrefix(err.Error(), "requester.SendMessageAndGetResponse: queue "+missing+" does not exist: ") ||
		strings.Contains(err.Error(), "SendMessageBatch") {
		t.Errorf("SendMessageAndGetResponse: err = %v", err)
	}
	_, err = r.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(missing), MessageBody: aws.String("hi")})
	if !errors.As(err, &gone) || !strings.HasPrefix(err.Error(), "requester.SendMessageAndStream: queue "+missing+" does not exist: ") ||
		strings.Contains(err.Error(), "SendMessageBatch") {
		t.Errorf("SendMessageAndStream: err = %v", err)
	}
}
