// Command gosdk is the client scenario of integration/clients/run.sh with
// the AWS SDK for Go v2 (SQS's JSON protocol). Usage: go run
// ./integration/clients/gosdk ENDPOINT. Each step checks what the SQS API
// Reference documents; the first difference exits 1.
package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gosdk ENDPOINT")
		os.Exit(2)
	}
	if err := scenario(context.Background(), os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "go:", err)
		os.Exit(1)
	}
	fmt.Println("go: ok")
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func scenario(ctx context.Context, endpoint string) error {
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("x", "x", "")})
	p := fmt.Sprintf("go-%d", os.Getpid())
	counts := func(url string) (string, error) {
		a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			return "", err
		}
		return a.Attributes["ApproximateNumberOfMessages"] + "/" + a.Attributes["ApproximateNumberOfMessagesNotVisible"], nil
	}
	wantCounts := func(url, want, what string) error {
		got, err := counts(url)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%s: counts %s, want %s", what, got, want)
		}
		return nil
	}

	// Create with attributes and tags.
	cq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(p + "-q"),
		Attributes: map[string]string{"VisibilityTimeout": "30", "MaximumMessageSize": "2048"}, Tags: map[string]string{"a": "1"}})
	if err != nil {
		return err
	}
	url := *cq.QueueUrl

	// An empty long poll waits.
	t0 := time.Now()
	r, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 1})
	if err != nil {
		return err
	}
	if len(r.Messages) != 0 || time.Since(t0) < 900*time.Millisecond {
		return fmt.Errorf("empty long poll: %d messages after %v", len(r.Messages), time.Since(t0))
	}

	// Send with String, Number and Binary attributes and a unicode body.
	body := "héllo ✓ 🚀 \r\n<&>"
	bin := []byte{0, 1, 254, 255}
	sent, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body,
		MessageAttributes: map[string]types.MessageAttributeValue{
			"s": {DataType: aws.String("String"), StringValue: aws.String("ü")},
			"n": {DataType: aws.String("Number"), StringValue: aws.String("-1.5e3")},
			"b": {DataType: aws.String("Binary"), BinaryValue: bin}}})
	if err != nil {
		return err
	}
	if aws.ToString(sent.MD5OfMessageBody) != md5Hex(body) || sent.MessageId == nil || sent.MD5OfMessageAttributes == nil {
		return fmt.Errorf("SendMessage answer %+v", sent)
	}

	// Batch send.
	var entries []types.SendMessageBatchRequestEntry
	for i := 1; i <= 3; i++ {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("e", i)), MessageBody: aws.String(fmt.Sprint("batch ", i))})
	}
	batch, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
	if err != nil {
		return err
	}
	if len(batch.Successful) != 3 || len(batch.Failed) != 0 {
		return fmt.Errorf("SendMessageBatch: %d successful, %d failed", len(batch.Successful), len(batch.Failed))
	}

	// Long-poll receive of all four, attributes included.
	got := map[string]types.Message{}
	for t0 := time.Now(); len(got) < 4 && time.Since(t0) < 10*time.Second; {
		r, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 2,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			return err
		}
		for _, m := range r.Messages {
			got[*m.Body] = m
		}
	}
	m, ok := got[body]
	if len(got) != 4 || !ok {
		return fmt.Errorf("received %d messages, want 4 with the unicode body", len(got))
	}
	ma := m.MessageAttributes
	if aws.ToString(ma["s"].StringValue) != "ü" || aws.ToString(ma["n"].StringValue) != "-1.5e3" || !bytes.Equal(ma["b"].BinaryValue, bin) {
		return fmt.Errorf("message attributes %+v", ma)
	}
	if m.Attributes["ApproximateReceiveCount"] != "1" || len(m.Attributes["SentTimestamp"]) != 13 {
		return fmt.Errorf("system attributes %v", m.Attributes)
	}
	if err := wantCounts(url, "0/4", "4 in flight"); err != nil {
		return err
	}

	// Change visibility to 0: received again, count 2.
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		return err
	}
	r, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 2,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
	if err != nil {
		return err
	}
	if len(r.Messages) != 1 || *r.Messages[0].Body != body || r.Messages[0].Attributes["ApproximateReceiveCount"] != "2" {
		return fmt.Errorf("after visibility 0: %+v", r.Messages)
	}

	// Delete one, batch-delete the rest.
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: r.Messages[0].ReceiptHandle}); err != nil {
		return err
	}
	var dels []types.DeleteMessageBatchRequestEntry
	for b, x := range got {
		if b != body {
			dels = append(dels, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("d", len(dels))), ReceiptHandle: x.ReceiptHandle})
		}
	}
	d, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: dels})
	if err != nil {
		return err
	}
	if len(d.Successful) != 3 || len(d.Failed) != 0 {
		return fmt.Errorf("DeleteMessageBatch: %d successful, %d failed", len(d.Successful), len(d.Failed))
	}
	if err := wantCounts(url, "0/0", "after deletes"); err != nil {
		return err
	}

	// Attributes.
	if _, err := c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"VisibilityTimeout": "60"}}); err != nil {
		return err
	}
	a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		return err
	}
	if a.Attributes["VisibilityTimeout"] != "60" || a.Attributes["MaximumMessageSize"] != "2048" ||
		a.Attributes["QueueArn"] != "arn:aws:sqs:us-east-1:000000000000:"+p+"-q" {
		return fmt.Errorf("queue attributes %v", a.Attributes)
	}

	// Tags.
	if _, err := c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: &url, Tags: map[string]string{"b": "2"}}); err != nil {
		return err
	}
	if _, err := c.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: &url, TagKeys: []string{"a"}}); err != nil {
		return err
	}
	tags, err := c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &url})
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(tags.Tags, map[string]string{"b": "2"}) {
		return fmt.Errorf("tags %v", tags.Tags)
	}

	// List with prefix.
	oq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(p + "-other")})
	if err != nil {
		return err
	}
	list, err := c.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(p + "-q")})
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(list.QueueUrls, []string{url}) {
		return fmt.Errorf("ListQueues with prefix: %v", list.QueueUrls)
	}

	// Purge.
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("to purge")}); err != nil {
		return err
	}
	if _, err := c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &url}); err != nil {
		return err
	}
	if err := wantCounts(url, "0/0", "after purge"); err != nil {
		return err
	}

	// Missing queue, delete queue.
	missing := func(name string) error {
		_, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
		var dne *types.QueueDoesNotExist
		if !errors.As(err, &dne) || dne.ErrorCode() != "AWS.SimpleQueueService.NonExistentQueue" {
			return fmt.Errorf("GetQueueUrl %s: %v, want QueueDoesNotExist (AWS.SimpleQueueService.NonExistentQueue)", name, err)
		}
		return nil
	}
	if err := missing(p + "-nope"); err != nil {
		return err
	}
	for _, u := range []*string{&url, oq.QueueUrl} {
		if _, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: u}); err != nil {
			return err
		}
	}
	return missing(p + "-q")
}
