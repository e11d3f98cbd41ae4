package sqsapi

import (
	"context"
	"maps"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// CallCounter counts the SQS API requests a client sends, by operation. SQS
// bills every request, including empty receives and retried attempts, so the
// counter sits after the SDK's retry loop and counts each attempt.
//
// Install it on a client with:
//
//	counter := new(sqsapi.CallCounter)
//	client := sqs.NewFromConfig(cfg, sqs.WithAPIOptions(counter.Register))
//
// The zero value is ready to use and safe for concurrent use.
type CallCounter struct {
	mu     sync.Mutex
	counts map[string]int64
}

// Register adds the counting middleware to an SDK middleware stack. Pass it
// to sqs.WithAPIOptions or append it to sqs.Options.APIOptions.
func (c *CallCounter) Register(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("tempqueues.CallCounter",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.Add(awsmiddleware.GetOperationName(ctx), 1)
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// Add adds n to the count of operation op.
func (c *CallCounter) Add(op string, n int64) {
	c.mu.Lock()
	if c.counts == nil {
		c.counts = make(map[string]int64)
	}
	c.counts[op] += n
	c.mu.Unlock()
}

// Get returns the count of operation op, e.g. "ReceiveMessage".
func (c *CallCounter) Get(op string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[op]
}

// Total returns the number of requests of all operations.
func (c *CallCounter) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t int64
	for _, n := range c.counts {
		t += n
	}
	return t
}

// Snapshot returns a copy of the counts by operation.
func (c *CallCounter) Snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Reset sets every count to zero.
func (c *CallCounter) Reset() {
	c.mu.Lock()
	c.counts = nil
	c.mu.Unlock()
}
