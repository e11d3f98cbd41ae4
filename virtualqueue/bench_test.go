package virtualqueue

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// memHost is a host queue that exists only for GetQueueAttributes and accepts
// batch acknowledgements, so in-process costs can be measured alone.
type memHost struct{ sqsapi.Client }

func (memHost) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"VisibilityTimeout": "30"}}, nil
}

func (memHost) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return &sqs.DeleteMessageBatchOutput{}, nil
}

func (memHost) ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

const benchHost = "https://sqs.us-east-1.amazonaws.com/123456789012/__RequesterClientQueues__0123456789abcdef0123456789abcdef0123-0"

func createVQ(tb testing.TB, c *Client, name string, attrs map[string]string) string {
	a := map[string]string{sqsapi.HostQueueURLAttribute: benchHost}
	for k, v := range attrs {
		a[k] = v
	}
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a})
	if err != nil {
		tb.Fatal(err)
	}
	return *out.QueueUrl
}

// heapPerQueue returns the heap bytes per idle virtual queue over n queues.
func heapPerQueue(tb testing.TB, n int, attrs map[string]string) float64 {
	c, err := New(memHost{})
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close(context.Background())
	createVQ(tb, c, "warm-up", nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		// A name like a requester's (36 bytes, UUID-sized), counted because
		// the virtual queue keeps it.
		createVQ(tb, c, fmt.Sprintf("reply-%030d", i), attrs)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestIdleVirtualQueueMemory checks the scale target: an idle virtual queue
// costs at most 512 bytes (no timing involved).
func TestIdleVirtualQueueMemory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("allocates 200k queues")
	}
	for _, tc := range []struct {
		name  string
		attrs map[string]string
	}{
		{"no-retention", nil},
		{"retention", map[string]string{sqsapi.IdleQueueRetentionPeriodAttribute: "300"}},
	} {
		per := heapPerQueue(t, 200_000, tc.attrs)
		t.Logf("%s: %.0f bytes per idle virtual queue", tc.name, per)
		if per > 512 {
			t.Errorf("%s: %.0f bytes per idle virtual queue, target at most 512", tc.name, per)
		}
	}
}

func BenchmarkIdleVirtualQueueMemory(b *testing.B) {
	b.ReportMetric(heapPerQueue(b, 100_000, map[string]string{sqsapi.IdleQueueRetentionPeriodAttribute: "300"}), "bytes/queue")
}

// BenchmarkCreateDelete measures creating and deleting a virtual queue;
// multiply ns/op by 1e6 for a million.
func BenchmarkCreateDelete(b *testing.B) {
	c, err := New(memHost{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	createVQ(b, c, "warm-up", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		u := createVQ(b, c, "q"+strconv.Itoa(i), nil)
		if _, err := c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
			b.Fatal(err)
		}
	}
}
