package responder_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqstest"
)

// downStore is a Store whose server is down.
type downStore struct{}

var errDown = errors.New("dial tcp 127.0.0.1:6379: connection refused")

func (downStore) Begin(context.Context, string, string, time.Duration) (responder.Entry, error) {
	return responder.Entry{}, errDown
}
func (downStore) Renew(context.Context, string, string, time.Duration) error { return errDown }
func (downStore) Complete(context.Context, string, string, *responder.Reply, time.Duration) error {
	return errDown
}
func (downStore) Release(context.Context, string, string) error { return errDown }

// A responder given no Logger is not silent: with its Store down, the
// failure reaches slog.Default() at Warn or above (it showed only in
// Stats().Errors), once however often it repeats.
func TestNoLoggerStillReportsFailures(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(prev)

	ctx := context.Background()
	srv := sqstest.NewServer()
	defer srv.Close(ctx)
	client := srv.Client()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("requests")})
	if err != nil {
		t.Fatal(err)
	}
	r, err := responder.New(client, func(o *responder.Options) { o.Store = downStore{} })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(ctx)
	h := responder.HandlerFunc(func(context.Context, *responder.Request) (*responder.Reply, error) { return nil, nil })
	for i := range 3 {
		m := types.Message{MessageId: aws.String("m"), Body: aws.String("b"), ReceiptHandle: aws.String("rh" + string(rune('0'+i)))}
		_ = r.Process(ctx, *q.QueueUrl, m, h)
	}
	out := buf.String()
	if r.Stats().Errors != 3 || strings.Count(out, "idempotency store failed") != 1 || !strings.Contains(out, "connection refused") {
		t.Fatalf("store errors %d; default log:\n%s", r.Stats().Errors, out)
	}
}
