// Package callcount counts SQS API calls by operation, for the library's
// Stats, its tests and benchmarks; sqsclient.CallCounter is the read-only face
// users get.
package callcount

import (
	"context"
	"maps"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// Counter counts API calls by operation. Register makes it count the
// requests of an *sqs.Client, each attempt after the SDK's retry loop; Add
// counts calls of any other client. The zero value is ready to use and safe
// for concurrent use.
type Counter struct {
	mu     sync.Mutex
	counts map[string]int64
}

// Register adds the counting middleware to an SDK middleware stack. Pass it
// to sqs.WithAPIOptions or append it to sqs.Options.APIOptions.
func (c *Counter) Register(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("tempqueues.CallCounter",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.Add(awsmiddleware.GetOperationName(ctx), 1)
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// Add adds n to the count of operation op.
func (c *Counter) Add(op string, n int64) {
	c.mu.Lock()
	if c.counts == nil {
		c.counts = make(map[string]int64)
	}
	c.counts[op] += n
	c.mu.Unlock()
}

// Get returns the count of operation op, e.g. "ReceiveMessage".
func (c *Counter) Get(op string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[op]
}

// Total returns the number of requests of all operations.
func (c *Counter) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t int64
	for _, n := range c.counts {
		t += n
	}
	return t
}

// Snapshot returns a copy of the counts by operation.
func (c *Counter) Snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Reset sets every count to zero.
func (c *Counter) Reset() {
	c.mu.Lock()
	c.counts = nil
	c.mu.Unlock()
}
