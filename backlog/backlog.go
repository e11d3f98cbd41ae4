package backlog

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// AttributesGetter reads queue attributes. *sqs.Client implements it.
type AttributesGetter interface {
	GetQueueAttributes(ctx context.Context, params *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Counts are a queue's approximate message counts.
type Counts struct {
	Visible  int64 `json:"visible"`   // ApproximateNumberOfMessages: waiting to be received
	InFlight int64 `json:"in_flight"` // ApproximateNumberOfMessagesNotVisible: received, not yet deleted
	Delayed  int64 `json:"delayed"`   // ApproximateNumberOfMessagesDelayed: not yet visible
}

var countAttributes = []types.QueueAttributeName{
	types.QueueAttributeNameApproximateNumberOfMessages,
	types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
}

// getCounts reads a queue's counts with one GetQueueAttributes call.
func getCounts(ctx context.Context, op string, client AttributesGetter, queueURL string) (Counts, error) {
	if client == nil {
		return Counts{}, wire.Invalid(op, "client", "must not be nil")
	}
	if queueURL == "" || wire.IsVirtualQueueURL(queueURL) {
		return Counts{}, wire.Invalid(op, "queueURL", "%q is not a queue URL", queueURL)
	}
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL), AttributeNames: countAttributes})
	if err != nil {
		return Counts{}, fmt.Errorf("backlog: GetQueueAttributes on %s: %w", queueURL, err)
	}
	var c Counts
	for i, p := range []*int64{&c.Visible, &c.InFlight, &c.Delayed} {
		name := string(countAttributes[i])
		v, ok := out.Attributes[name]
		if !ok {
			return Counts{}, fmt.Errorf("backlog: GetQueueAttributes on %s returned no %s", queueURL, name)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return Counts{}, fmt.Errorf("backlog: GetQueueAttributes on %s: %s=%q is not a count", queueURL, name, v)
		}
		*p = n
	}
	return c, nil
}

// Figures are the backlog-per-worker figures of a queue.
type Figures struct {
	Counts
	// Messages is the backlog counted: Visible, plus InFlight and Delayed
	// when Options include them.
	Messages int64 `json:"messages"`
	// Workers is the number of running workers the figures are for.
	Workers int `json:"workers"`
	// BacklogPerWorker is Messages / Workers (Messages when Workers is 0).
	BacklogPerWorker float64 `json:"backlog_per_worker"`
	// ProcessingTime is the average processing time of a message used.
	ProcessingTime time.Duration `json:"processing_time_ns"`
	// TargetBacklogPerWorker is the backlog a worker clears within the
	// acceptable latency: MaxConcurrency x AcceptableLatency / ProcessingTime.
	// 0 when the processing time or the acceptable latency is not known:
	// there is no target then.
	TargetBacklogPerWorker float64 `json:"target_backlog_per_worker"`
	// DesiredWorkers is ceil(Messages / TargetBacklogPerWorker), clamped
	// to [MinWorkers, MaxWorkers]. Without a target it is Workers (at
	// least 1 while messages wait), clamped.
	DesiredWorkers int `json:"desired_workers"`
}

// Compute returns the figures for counts c under the options.
func Compute(c Counts, optFns ...func(*Options)) (Figures, error) {
	o, err := buildOptions("backlog.Compute", optFns)
	if err != nil {
		return Figures{}, err
	}
	return compute(c, o), nil
}

// Measure reads the queue's counts (one GetQueueAttributes call) and
// returns its figures under the options.
func Measure(ctx context.Context, client AttributesGetter, queueURL string, optFns ...func(*Options)) (Figures, error) {
	o, err := buildOptions("backlog.Measure", optFns)
	if err != nil {
		return Figures{}, err
	}
	c, err := getCounts(ctx, "backlog.Measure", client, queueURL)
	if err != nil {
		return Figures{}, err
	}
	return compute(c, o), nil
}

func compute(c Counts, o Options) Figures {
	processing, workers := max(o.ProcessingTime, 0), max(o.Workers, 0)
	f := Figures{Counts: c, Messages: c.Visible, Workers: workers, ProcessingTime: processing}
	if o.IncludeInFlight {
		f.Messages += c.InFlight
	}
	if o.IncludeDelayed {
		f.Messages += c.Delayed
	}
	f.BacklogPerWorker = float64(f.Messages) / float64(max(workers, 1))
	desired := workers
	if processing > 0 && o.AcceptableLatency > 0 {
		f.TargetBacklogPerWorker = float64(o.MaxConcurrency) * float64(o.AcceptableLatency) / float64(processing)
		d := math.Ceil(float64(f.Messages) / f.TargetBacklogPerWorker)
		desired = int(min(d, math.MaxInt32))
	} else if f.Messages > 0 {
		desired = max(desired, 1)
	}
	if o.MaxWorkers > 0 {
		desired = min(desired, o.MaxWorkers)
	}
	f.DesiredWorkers = max(desired, o.MinWorkers)
	return f
}
