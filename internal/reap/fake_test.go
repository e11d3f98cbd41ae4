package reap_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// memSQS is an in-memory stand-in for the calls of a Sweeper and a
// Heartbeater, for fault injection. The fauxqs tests are the reference for behaviour.
type memSQS struct {
	sqsapi.Client // nil: other calls panic

	mu     sync.Mutex
	queues map[string]*memQueue // by URL
	calls  map[string]int
	// fault, if set, may fail a call (op, queue URL) before it runs.
	fault func(op, url string) error
}

type memQueue struct {
	tags     map[string]string
	messages int
}

func newMemSQS() *memSQS {
	return &memSQS{queues: map[string]*memQueue{}, calls: map[string]int{}}
}

func (m *memSQS) add(name string, tags map[string]string, messages int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := "https://sqs.us-east-1.amazonaws.com/123456789012/" + name
	m.queues[u] = &memQueue{tags: tags, messages: messages}
	return u
}

func (m *memSQS) has(u string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.queues[u]
	return ok
}

// begin counts a call, applies the fault and returns the queue.
func (m *memSQS) begin(op, u string) (*memQueue, error) {
	m.mu.Lock()
	m.calls[op]++
	fault := m.fault
	m.mu.Unlock()
	if fault != nil {
		if err := fault(op, u); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	q, ok := m.queues[u]
	if !ok && op != "ListQueues" {
		return nil, &types.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
	}
	return q, nil
}

func (m *memSQS) ListQueues(_ context.Context, in *sqs.ListQueuesInput, _ ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error) {
	if _, err := m.begin("ListQueues", ""); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var urls []string
	for u := range m.queues {
		if strings.HasPrefix(u[strings.LastIndexByte(u, '/')+1:], aws.ToString(in.QueueNamePrefix)) {
			urls = append(urls, u)
		}
	}
	slices.Sort(urls)
	from, _ := strconv.Atoi(aws.ToString(in.NextToken))
	urls = urls[from:]
	out := &sqs.ListQueuesOutput{}
	if in.MaxResults != nil && len(urls) > int(*in.MaxResults) {
		urls = urls[:*in.MaxResults]
		out.NextToken = aws.String(strconv.Itoa(from + len(urls)))
	}
	out.QueueUrls = urls
	return out, nil
}

func (m *memSQS) ListQueueTags(_ context.Context, in *sqs.ListQueueTagsInput, _ ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
	q, err := m.begin("ListQueueTags", aws.ToString(in.QueueUrl))
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tags := map[string]string{}
	for k, v := range q.tags {
		tags[k] = v
	}
	return &sqs.ListQueueTagsOutput{Tags: tags}, nil
}

func (m *memSQS) TagQueue(_ context.Context, in *sqs.TagQueueInput, _ ...func(*sqs.Options)) (*sqs.TagQueueOutput, error) {
	q, err := m.begin("TagQueue", aws.ToString(in.QueueUrl))
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if q.tags == nil {
		q.tags = map[string]string{}
	}
	for k, v := range in.Tags {
		q.tags[k] = v
	}
	return &sqs.TagQueueOutput{}, nil
}

func (m *memSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	q, err := m.begin("GetQueueAttributes", aws.ToString(in.QueueUrl))
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"ApproximateNumberOfMessages":           strconv.Itoa(q.messages),
		"ApproximateNumberOfMessagesNotVisible": "0",
		"ApproximateNumberOfMessagesDelayed":    "0",
	}}, nil
}

func (m *memSQS) DeleteQueue(_ context.Context, in *sqs.DeleteQueueInput, _ ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	if _, err := m.begin("DeleteQueue", aws.ToString(in.QueueUrl)); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.queues, aws.ToString(in.QueueUrl))
	return &sqs.DeleteQueueOutput{}, nil
}
