package heartbeat_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
)

// hostName returns a requester host queue name no other test uses.
func hostName(t *testing.T) string {
	t.Helper()
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "tqh" + hex.EncodeToString(b[:]) + "_" + uuid.NewString() + "-0"
}

// createQueue creates an untagged queue deleted at the end of the test.
func createQueue(t *testing.T, client *sqs.Client, name string) string {
	t.Helper()
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("CreateQueue %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	return aws.ToString(out.QueueUrl)
}

func tagsOf(t *testing.T, client *sqs.Client, u string) map[string]string {
	t.Helper()
	out, err := client.ListQueueTags(context.Background(), &sqs.ListQueueTagsInput{QueueUrl: aws.String(u)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Tags
}

// inBubble runs fn in a testing/synctest bubble with a client of an
// in-process sqstest server made in it, and the client's call counter.
func inBubble(t *testing.T, fn func(t *testing.T, client *sqs.Client, counter *callcount.Counter)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		client, counter := sqstestenv.InProcess(t).Client(t)
		fn(t, client, counter)
	})
}

// tagger is an in-memory TagQueue: it records each call's tags, answers
// with fail's error when set, and blocks while block is set until the
// call's context ends.
type tagger struct {
	mu    sync.Mutex
	calls []map[string]string
	fail  func(queueURL string) error
	block bool
}

func (f *tagger) TagQueue(ctx context.Context, in *sqs.TagQueueInput, _ ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	f.mu.Lock()
	f.calls = append(f.calls, in.Tags)
	fail, block := f.fail, f.block
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if fail != nil {
		if err := fail(aws.ToString(in.QueueUrl)); err != nil {
			return nil, err
		}
	}
	return &sqs.TagQueueOutput{}, nil
}

func (f *tagger) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *tagger) last() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return nil
	}
	return f.calls[len(f.calls)-1]
}
