package virtualqueue_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func attrs(n int) map[string]types.MessageAttributeValue {
	m := make(map[string]types.MessageAttributeValue, n)
	for i := 0; i < n; i++ {
		m["a"+strings.Repeat("x", i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	return m
}

// Every bad input fails with a typed error and makes no API call.
func TestBadInputIsRejectedBeforeAnyCall(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		c := e.client()
		u := e.createVQ(c, "ok")
		e.counter.Reset()
		ctx := context.Background()
		create := func(name string, a map[string]string) error {
			_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a})
			return err
		}
		host := map[string]string{sqsapi.HostQueueURLAttribute: e.host}
		with := func(k, v string) map[string]string {
			return map[string]string{sqsapi.HostQueueURLAttribute: e.host, k: v}
		}
		cases := map[string]error{
			"empty name":        create("", host),
			"bad name":          create("has space", host),
			"long name":         create(strings.Repeat("n", 81), host),
			"fifo name":         create("v.fifo", host),
			"other attribute":   create("v", with("VisibilityTimeout", "5")),
			"retention zero":    create("v", with(sqsapi.IdleQueueRetentionPeriodAttribute, "0")),
			"retention not int": create("v", with(sqsapi.IdleQueueRetentionPeriodAttribute, "1.5")),
			"virtual host":      create("v", map[string]string{sqsapi.HostQueueURLAttribute: u}),
			"relative host":     create("v", map[string]string{sqsapi.HostQueueURLAttribute: "queue"}),
			"set attributes": func() error {
				_, err := c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(u)})
				return err
			}(),
			"malformed url": func() error {
				_, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String("#x")})
				return err
			}(),
			"max messages 11": func() error {
				_, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), MaxNumberOfMessages: 11})
				return err
			}(),
			"wait 21": func() error {
				_, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), WaitTimeSeconds: 21})
				return err
			}(),
			"receive visibility": func() error {
				_, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), VisibilityTimeout: 43201})
				return err
			}(),
			"10 attributes + ours": func() error {
				_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String("b"), MessageAttributes: attrs(10)})
				return err
			}(),
			"oversized body": func() error {
				_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String(strings.Repeat("b", 1<<20))})
				return err
			}(),
			"NUL in body": func() error {
				_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String("a\x00b")})
				return err
			}(),
			"U+FFFE body": func() error {
				_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String("\ufffe")})
				return err
			}(),
			"invalid UTF-8 body": func() error {
				_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String("caf\xc3")})
				return err
			}(),
			"bad attribute value": func() error {
				_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String("b"),
					MessageAttributes: map[string]types.MessageAttributeValue{"a": wire.StringAttribute("\x1f")}})
				return err
			}(),
			"batch entry with NUL": func() error {
				_, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(u), Entries: []types.SendMessageBatchRequestEntry{
					{Id: aws.String("a"), MessageBody: aws.String("fine")}, {Id: aws.String("b"), MessageBody: aws.String("\x00")}}})
				return err
			}(),
			"delay 901": func() error {
				_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String("b"), DelaySeconds: 901})
				return err
			}(),
			"batch of 11": func() error {
				es := make([]types.SendMessageBatchRequestEntry, 11)
				for i := range es {
					es[i] = types.SendMessageBatchRequestEntry{Id: aws.String(string(rune('a' + i))), MessageBody: aws.String("b")}
				}
				_, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(u), Entries: es})
				return err
			}(),
			"visibility past 12h": func() error {
				_, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(u), ReceiptHandle: aws.String("h"), VisibilityTimeout: 43201})
				return err
			}(),
			"empty receipt handle": func() error {
				_, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(u)})
				return err
			}(),
		}
		for name, err := range cases {
			var ie *sqsapi.InvalidInputError
			if !errors.As(err, &ie) || !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Errorf("%s: got %v, want *sqsapi.InvalidInputError", name, err)
			}
		}
		if n := e.counter.Total(); n != 0 {
			t.Fatalf("bad input made %d API calls: %v", n, e.counter.Snapshot())
		}
		// Unknown virtual queues look like SQS's missing queues.
		_, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.host + "#nobody")})
		var qdne *types.QueueDoesNotExist
		if !errors.As(err, &qdne) {
			t.Fatalf("receive on unknown virtual queue = %v", err)
		}
		// Nine attributes of the caller's plus the routing one is fine.
		send := &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String("b"), MessageAttributes: attrs(9)}
		if _, err := c.SendMessage(ctx, send); err != nil {
			t.Fatalf("9 attributes: %v", err)
		}
	})
}

// faulty wraps a client and fails host receives while failing is set.
type faulty struct {
	sqsapi.Client
	failing  atomic.Bool
	err      error
	receives atomic.Int64
}

func (f *faulty) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.receives.Add(1)
	if f.failing.Load() {
		return nil, f.err
	}
	return f.Client.ReceiveMessage(ctx, in, o...)
}

func TestTransientErrorsBackOffAndLoseNothing(t *testing.T) {
	t.Parallel()
	for name, injected := range map[string]error{
		"throttling": &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down", Fault: smithy.FaultClient},
		"network":    &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")},
		"5xx":        &smithy.GenericAPIError{Code: "InternalError", Message: "oops", Fault: smithy.FaultServer},
	} {
		t.Run(name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, b *sqstestenv.Backend) {
				e := newEnv(t, b, 30)
				f := &faulty{Client: e.raw, err: injected}
				f.failing.Store(true)
				c := mustNew(t, f)
				defer c.Close(context.Background())
				u := e.createVQ(c, "v")
				send(t, c, u, "survives")
				got := make(chan []types.Message, 1)
				go func() {
					out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), WaitTimeSeconds: 20})
					if err != nil {
						t.Errorf("transient error reached the receiver: %v", err)
						got <- nil
						return
					}
					got <- out.Messages
				}()
				testtime.Advance(time.Second)
				// Full-jitter backoff from 100ms: a hot loop would make
				// thousands of calls in a second.
				if n := f.receives.Load(); n > 40 || n < 3 {
					t.Fatalf("%d receives in 1s of failures: want a few, backed off", n)
				}
				f.failing.Store(false)
				select {
				case m := <-got:
					if len(m) != 1 || *m[0].Body != "survives" {
						t.Fatalf("got %v", m)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("message not delivered after the faults stopped")
				}
			})
		})
	}
}

func TestPermanentErrorReachesWaiters(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b, 30)
		f := &faulty{Client: e.raw, err: &smithy.GenericAPIError{Code: "AccessDenied", Message: "no", Fault: smithy.FaultClient}}
		f.failing.Store(true)
		c := mustNew(t, f)
		defer c.Close(context.Background())
		u := e.createVQ(c, "v")
		_, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), WaitTimeSeconds: 5})
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "AccessDenied" {
			t.Fatalf("receive = %v, want the AccessDenied API error", err)
		}
	})
}

// FuzzCreateQueueInput checks that any CreateQueue input either makes a
// virtual queue whose URL parses back, or fails with a typed input error,
// and never panics.
func FuzzCreateQueueInput(f *testing.F) {
	f.Add("reply-1", "https://sqs.us-east-1.amazonaws.com/1/host", "IdleQueueRetentionPeriodSeconds", "30")
	f.Add("", "http://h/1/q", "", "")
	f.Add("a#b", "http://h/1/q#x", "VisibilityTimeout", "-1")
	f.Add("n", "http://h/1/q.fifo", "IdleQueueRetentionPeriodSeconds", "99999999999")
	f.Fuzz(func(t *testing.T, name, hostURL, key, value string) {
		c := mustNew(t, stubHost{})
		defer c.Close(context.Background())
		a := map[string]string{sqsapi.HostQueueURLAttribute: hostURL}
		if key != "" {
			a[key] = value
		}
		out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a})
		if err != nil {
			if !errors.Is(err, sqsapi.ErrInvalidInput) {
				t.Fatalf("CreateQueue(%q, %v) = %v, want an input error", name, a, err)
			}
			return
		}
		h, n, err := wire.ParseVirtualQueueURL(*out.QueueUrl)
		if err != nil || h != hostURL || n != name {
			t.Fatalf("created %q from (%q, %q): parse gives %q %q %v", *out.QueueUrl, hostURL, name, h, n, err)
		}
	})
}

// stubHost answers GetQueueAttributes for any host and nothing else.
type stubHost struct{ sqsapi.Client }

func (stubHost) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"VisibilityTimeout": "30"}}, nil
}
