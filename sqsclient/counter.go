package sqsclient

import (
	"github.com/aws/smithy-go/middleware"

	"github.com/tempqueues/tempqueues/internal/callcount"
)

// CallCounter counts the SQS API requests a client sends, by operation, and
// the requests SQS bills for them. SQS bills every request, including empty
// receives and retried attempts, so the counter sits after the SDK's retry
// loop and counts each attempt; and it bills each started 64 KiB of the
// message payload a call sends or receives as one request, which Billed
// counts.
//
// Install it on a client with:
//
//	counter := new(sqsclient.CallCounter)
//	client := sqs.NewFromConfig(cfg, sqs.WithAPIOptions(counter.Register))
//
// Read it with Total, Snapshot or Billed; to count a stretch of time,
// subtract an earlier reading. The zero value is ready to use and safe for concurrent
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

// Billed returns the requests SQS bills for the calls counted, the figure
// its price per million applies to: each call is at least one, and a
// SendMessage or SendMessageBatch is one per started 64 KiB of the bodies
// and message attributes it sends (a Binary attribute counts its raw
// bytes), a ReceiveMessage one per started 64 KiB of those it returns.
// It equals Total while no call carries more than 64 KiB.
func (c *CallCounter) Billed() int64 { return c.c.BilledTotal() }
