package virtualqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
	"github.com/tempqueues/tempqueues/virtualqueue"
)

// Errors name the call the caller made, package-qualified: a send to a
// virtual queue whose host is gone fails as virtualqueue.SendMessage, not
// as the SendMessageBatch that carried it, and still matches
// QueueDoesNotExist; a rejected input names virtualqueue.SendMessage too.
func TestErrorsNameTheCallersOperation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	c, err := virtualqueue.New(srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	vq := srv.URL() + "/000000000000/no-such-host#vq"
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(vq), MessageBody: aws.String("hi")})
	var gone *types.QueueDoesNotExist
	if !errors.As(err, &gone) || !strings.HasPrefix(err.Error(), "virtualqueue.SendMessage: queue "+vq+" does not exist: ") ||
		strings.Contains(err.Error(), "SendMessageBatch") {
		t.Errorf("send to a missing host: err = %v", err)
	}
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(vq), MessageBody: aws.String("hi"), DelaySeconds: 1000})
	var ie *sqsapi.InvalidInputError
	if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), "virtualqueue.SendMessage: invalid ") {
		t.Errorf("DelaySeconds 1000: err = %v", err)
	}
}
