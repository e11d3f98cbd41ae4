package reap_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/reap"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// testPrefix returns a queue-name prefix no other test uses, so a sweep
// sees only the test's own queues even on a shared server.
func testPrefix(t *testing.T) string {
	t.Helper()
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "tqr" + hex.EncodeToString(b[:]) + "_"
}

// hostName returns a requester host queue name: <prefix><uuid>-<n>.
func hostName(prefix string, n int) string {
	return prefix + uuid.NewString() + "-" + strconv.Itoa(n)
}

// javaTags returns tags exactly as the Java client writes them:
// Long.toString of the retention in seconds and of the epoch milliseconds.
func javaTags(retentionSeconds int, heartbeat time.Time) map[string]string {
	return map[string]string{
		sqsapi.RetentionTag: strconv.Itoa(retentionSeconds),
		sqsapi.HeartbeatTag: strconv.FormatInt(heartbeat.UnixMilli(), 10),
	}
}

// createQueue creates a queue, tagged the Java way (CreateQueue, then
// TagQueue) when tags is not nil, and deletes it at the end of the test.
func createQueue(t testing.TB, client *sqs.Client, name string, tags map[string]string) string {
	t.Helper()
	ctx := context.Background()
	in := &sqs.CreateQueueInput{QueueName: aws.String(name)}
	if strings.HasSuffix(name, ".fifo") {
		in.Attributes = map[string]string{"FifoQueue": "true"}
	}
	out, err := client.CreateQueue(ctx, in)
	if err != nil {
		t.Fatalf("CreateQueue %s: %v", name, err)
	}
	u := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
	})
	if tags != nil {
		if _, err := client.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(u), Tags: tags}); err != nil {
			t.Fatalf("TagQueue %s: %v", name, err)
		}
	}
	return u
}

func send(t testing.TB, client *sqs.Client, u string, delay int32) {
	t.Helper()
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String("left over"), DelaySeconds: delay}); err != nil {
		t.Fatal(err)
	}
}

func exists(t testing.TB, client *sqs.Client, u string) bool {
	t.Helper()
	_, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u)})
	var gone *types.QueueDoesNotExist
	if errors.As(err, &gone) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func tagsOf(t testing.TB, client *sqs.Client, u string) map[string]string {
	t.Helper()
	out, err := client.ListQueueTags(context.Background(), &sqs.ListQueueTagsInput{QueueUrl: aws.String(u)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Tags
}

// testClock is an adjustable test clock: real time plus an offset, or,
// when frozen, a fixed instant plus the offset.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
	frozen time.Time
}

func frozenClock() *testClock { return &testClock{frozen: time.Now()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.frozen.IsZero() {
		return c.frozen.Add(c.offset)
	}
	return time.Now().Add(c.offset)
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// option returns the option that makes a Reaper or Sweeper use c.
func (c *testClock) option() func(*reap.Config) {
	return reap.WithClock(clock.Clock{NowFunc: c.Now})
}

// inBubble runs fn in a testing/synctest bubble with an in-process
// sqstest server made in it.
func inBubble(t *testing.T, fn func(t *testing.T, b *sqstestenv.Backend)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) { fn(t, sqstestenv.InProcess(t)) })
}
