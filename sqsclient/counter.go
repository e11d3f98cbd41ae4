package sqsclient

import (
	"github.com/aws/smithy-go/middleware"

	"github.com/tempqueues/tempqueues/internal/callcount"
)

// CallCounter counts the SQS API requests a client sends, by operation. SQS
// bills every request, including empty receives and retried attempts, so the
// counter sits after the SDK's retry loop and counts each attempt.
//
// Install it on a client with:
//
//	counter := new(sqsclient.CallCounter)
//	client := sqs.NewFromConfig(cfg, sqs.WithAPIOptions(counter.Register))
//
// Read it with Total or Snapshot; to count a stretch of time, subtract an
// earlier Snapshot. The zero value is ready to use and safe for concurrent
// use.
type CallCounter struct{ c callcount.Counter }

// Register adds the counting middleware to an SDK middleware stack. Pass it
// to sqs.WithAPIOptions or append it to sqs.Options.APIOptions.
func (c *CallCounter) Register(stack *middleware.Stack) error { return c.c.Register(stack) }

// Total returns the number of requests of all operations.
func (c *CallCounter) Total() int64 { return c.c.Total() }

// Snapshot returns a copy of the counts by operation, e.g.
// Snapshot()["ReceiveMessage"].
func (c *CallCounter) Snapshot() map[string]int64 { return c.c.Snapshot() }
