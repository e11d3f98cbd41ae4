package sqstest_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/sqstest"
)

// target is one server a conformance check runs against, seen only through
// the SDK. On sqstest it has its own server and a manual clock, so "waiting"
// is advancing the clock; on fauxqs (or an external endpoint) it sleeps.
type target struct {
	t     *testing.T
	name  string
	c     *sqs.Client
	srv   *sqstest.Server // nil unless sqstest
	clock *sqstest.Clock  // nil unless sqstest
	ctx   context.Context
}

func newTarget(t *testing.T, kind string) *target {
	t.Helper()
	x := &target{t: t, name: kind, ctx: context.Background()}
	var b *sqstestenv.Backend
	if kind == "sqstest" || kind == "sqstest-query" {
		x.clock = sqstest.NewClock(time.Time{})
		b = sqstestenv.SQSTest(t, func(o *sqstest.Options) { o.Clock = x.clock })
		x.srv = b.Server
		if kind == "sqstest-query" {
			// The same server, spoken to in the query protocol.
			x.c = x.srv.Client(func(o *sqs.Options) {
				o.HTTPClient = &http.Client{Transport: queryTransport{h: x.srv}}
			})
			return x
		}
	} else {
		b = sqstestenv.Fauxqs(t)
		x.name = b.Name
	}
	x.c, _ = b.Client(t)
	return x
}

func (x *target) emulated() bool { return x.srv != nil }

// sleep lets d pass: the clock on sqstest, real time elsewhere.
func (x *target) sleep(d time.Duration) {
	if x.clock != nil {
		x.clock.Advance(d)
		return
	}
	time.Sleep(d) // real: a real server's (fauxqs's) time
}

// waitParked returns once n receives are parked in a long poll (sqstest),
// or after a short real wait that lets them reach the server (others).
func (x *target) waitParked(n int) {
	x.t.Helper()
	if x.srv == nil {
		time.Sleep(250 * time.Millisecond) // real: a real server tells no count of parked receives
		return
	}
	if !testtime.Until(5*time.Second, func() bool { return x.srv.Parked() >= n }) {
		x.t.Fatalf("only %d of %d receives parked", x.srv.Parked(), n)
	}
}

func (x *target) createQueue(base string, attrs map[string]string) string {
	x.t.Helper()
	name := sqstestenv.QueueName(x.t, base)
	if attrs[string(types.QueueAttributeNameFifoQueue)] == "true" {
		name = name[:min(len(name), 75)] + ".fifo"
	}
	out, err := x.c.CreateQueue(x.ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		x.t.Fatalf("CreateQueue %s: %v", name, err)
	}
	url := *out.QueueUrl
	x.t.Cleanup(func() { _, _ = x.c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &url}) })
	return url
}

func (x *target) send(url, body string) *sqs.SendMessageOutput {
	x.t.Helper()
	out, err := x.c.SendMessage(x.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body})
	if err != nil {
		x.t.Fatalf("SendMessage: %v", err)
	}
	return out
}

func (x *target) sendFIFO(url, body, group, dedup string) *sqs.SendMessageOutput {
	x.t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageGroupId: &group}
	if dedup != "" {
		in.MessageDeduplicationId = &dedup
	}
	out, err := x.c.SendMessage(x.ctx, in)
	if err != nil {
		x.t.Fatalf("SendMessage: %v", err)
	}
	return out
}

// receive does a short-poll receive (WaitTimeSeconds 0 means "absent", so
// the queue default of 0 applies).
func (x *target) receive(url string, max int32) []types.Message {
	x.t.Helper()
	out, err := x.c.ReceiveMessage(x.ctx, &sqs.ReceiveMessageInput{
		QueueUrl: &url, MaxNumberOfMessages: max,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		x.t.Fatalf("ReceiveMessage: %v", err)
	}
	return out.Messages
}

// receiveAll drains up to want messages with short polls.
func (x *target) receiveAll(url string, want int) []types.Message {
	x.t.Helper()
	var got []types.Message
	for i := 0; i < 20 && len(got) < want; i++ {
		got = append(got, x.receive(url, 10)...)
	}
	return got
}

func (x *target) counts(url string) (visible, notVisible, delayed string) {
	x.t.Helper()
	out, err := x.c.GetQueueAttributes(x.ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		}})
	if err != nil {
		x.t.Fatalf("GetQueueAttributes: %v", err)
	}
	a := out.Attributes
	return a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"], a["ApproximateNumberOfMessagesDelayed"]
}

func (x *target) wantCounts(url, visible, notVisible, delayed string) {
	x.t.Helper()
	v, n, d := x.counts(url)
	if v != visible || n != notVisible || d != delayed {
		x.t.Fatalf("counts visible/notvisible/delayed = %s/%s/%s, want %s/%s/%s", v, n, d, visible, notVisible, delayed)
	}
}

func (x *target) attributes(url string, names ...types.QueueAttributeName) map[string]string {
	x.t.Helper()
	out, err := x.c.GetQueueAttributes(x.ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: names})
	if err != nil {
		x.t.Fatalf("GetQueueAttributes: %v", err)
	}
	return out.Attributes
}

// wantAPIError fails unless err is an API error with the given code. The
// query-compatible code may carry the "AWS.SimpleQueueService." prefix,
// which servers differ on for unmodelled errors.
func wantAPIError(t *testing.T, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v, want API error %s", err, code)
	}
	if got := strings.TrimPrefix(ae.ErrorCode(), "AWS.SimpleQueueService."); got != code {
		t.Fatalf("error code = %q (%v), want %s", ae.ErrorCode(), err, code)
	}
}

// wantTyped fails unless errors.As(err, target) holds.
func wantTyped[E error](t *testing.T, err error) {
	t.Helper()
	var e E
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want %T", err, err, e)
	}
}

// attributesMD5 is an independent implementation of AWS's
// MD5OfMessageAttributes, written from the published description.
func attributesMD5(attrs map[string]types.MessageAttributeValue) string {
	var buf bytes.Buffer
	field := func(b []byte) {
		_ = binary.Write(&buf, binary.BigEndian, int32(len(b)))
		buf.Write(b)
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := attrs[n]
		field([]byte(n))
		field([]byte(aws.ToString(v.DataType)))
		if v.BinaryValue != nil {
			buf.WriteByte(2)
			field(v.BinaryValue)
		} else {
			buf.WriteByte(1)
			field([]byte(aws.ToString(v.StringValue)))
		}
	}
	sum := md5.Sum(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

func bodyMD5(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
