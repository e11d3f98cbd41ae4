package batch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
)

func TestSendsReceivesDeletesOnRealServer(t *testing.T) {
	b := sqstestenv.Fauxqs(t)
	client, counter := b.Client(t)
	ctx := context.Background()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "b"))})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(q.QueueUrl)
	defer client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl})

	sends := batch.NewSends(client, 2, nil)
	const n = 40
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := sends.Do(ctx, url, types.SendMessageBatchRequestEntry{MessageBody: aws.String(fmt.Sprint(i))})
			if err != nil || out.MessageId == nil {
				t.Errorf("send %d: %v %v", i, out.MessageId, err)
			}
		}()
	}
	wg.Wait()
	sendCalls := counter.Get("SendMessageBatch")
	if sendCalls >= n {
		t.Errorf("%d SendMessageBatch calls for %d concurrent sends: no coalescing", sendCalls, n)
	}
	t.Logf("%d concurrent sends took %d SendMessageBatch calls", n, sendCalls)

	var handles []string
	for len(handles) < n {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			t.Fatalf("received %d of %d", len(handles), n)
		}
		for _, m := range out.Messages {
			handles = append(handles, aws.ToString(m.ReceiptHandle))
		}
	}
	vis := batch.NewVisibilities(client, 2)
	if err := vis.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := vis.Do(ctx, url, batch.Visibility{ReceiptHandle: handles[0], Timeout: 60}); err != nil {
		t.Fatalf("visibility change: %v", err)
	}
	_, err = vis.Do(ctx, url, batch.Visibility{ReceiptHandle: "bogus", Timeout: 60})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("visibility change of a bogus handle = %v, want an API error", err)
	}
	deletes := batch.NewDeletes(client, 2, 0)
	for _, h := range handles {
		wg.Add(1)
		deletes.Submit(url, h, func(_ struct{}, err error) {
			if err != nil {
				t.Errorf("delete: %v", err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if dc := counter.Get("DeleteMessageBatch"); dc > int64(n/10+2) {
		t.Errorf("%d DeleteMessageBatch calls for %d submitted deletes", dc, n)
	}
	for _, c := range []interface{ Close(context.Context) error }{sends, vis, deletes} {
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	if v := attrs.Attributes["ApproximateNumberOfMessages"]; v != "0" {
		t.Fatalf("%s messages left", v)
	}
}
