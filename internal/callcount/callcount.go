// Package callcount counts SQS API calls by operation, for the library's
// Stats, its tests and benchmarks, and what SQS bills for them: billed
// requests (a call carrying or returning more than 64 KiB of message
// payload is billed as one request per started 64 KiB) and the bytes of
// the HTTP bodies. sqsclient.CallCounter is the read-only face users get.
package callcount

import (
	"context"
	"fmt"
	"io"
	"maps"
	"sync"
	"sync/atomic"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// ChunkBytes is the payload SQS bills as one request: each started 64 KiB
// of a call's payload is a request on the bill.
const ChunkBytes = 64 << 10

// BilledRequests is what SQS bills for one call carrying or returning
// payload bytes of message payload (bodies and message attributes): one
// request per started 64 KiB, and at least one.
func BilledRequests(payload int) int64 {
	return max(1, (int64(payload)+ChunkBytes-1)/ChunkBytes)
}

// Counter counts API calls by operation, the requests SQS bills for them,
// and the bytes of their HTTP bodies. Register makes it count the requests
// of an *sqs.Client, each attempt after the SDK's retry loop; Add counts
// calls of any other client (calls only: billed requests and bytes are
// what Register's middleware sees). The zero value is ready to use and
// safe for concurrent use.
type Counter struct {
	mu     sync.Mutex
	counts map[string]int64
	billed map[string]int64

	sent, received atomic.Int64
}

// payloadKey is the stack value, set before the retry loop, holding the
// message payload a send carries (every attempt carries the same).
type payloadKey struct{}

// Register adds the counting middleware to an SDK middleware stack. Pass it
// to sqs.WithAPIOptions or append it to sqs.Options.APIOptions. Every
// Counter's middleware has IDs of its own, so that several counters can
// count one client.
//
// Each attempt is counted as one call and, at its start, as the requests
// SQS bills for the payload it sends (a SendMessage or SendMessageBatch:
// the bodies and message attributes of all its messages, as
// wire.MessageSize counts them, one request per started 64 KiB of the
// total); a ReceiveMessage adds, once it has returned, the requests beyond
// the first that the messages it returned are billed (their bodies and
// message attributes). Every other call is one billed request. The bytes
// counted are the lengths of the HTTP request and response bodies, headers
// left out, as the transport sent and received them.
func (c *Counter) Register(stack *middleware.Stack) error {
	id := fmt.Sprintf("tempqueues.CallCounter.%p", c)
	err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc(id+".payload",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if n, ok := sentPayload(in.Parameters); ok {
				ctx = middleware.WithStackValue(ctx, payloadKey{}, n)
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	if err != nil {
		return err
	}
	err = stack.Finalize.Add(middleware.FinalizeMiddlewareFunc(id,
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			op := awsmiddleware.GetOperationName(ctx)
			n, _ := middleware.GetStackValue(ctx, payloadKey{}).(int)
			c.count(op, 1, BilledRequests(n))
			out, md, err := next.HandleFinalize(ctx, in)
			if r, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && r != nil {
				size := 0
				for _, m := range r.Messages {
					size += wire.MessageSize(m.Body, m.MessageAttributes)
				}
				if extra := BilledRequests(size) - 1; extra > 0 {
					c.count(op, 0, extra)
				}
			}
			return out, md, err
		}), middleware.After)
	if err != nil {
		return err
	}
	// Innermost, next to the transport: the request as sent, the response
	// as received (the SDK's deserializer reads the body to its end and
	// closes it).
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc(id+".bytes",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			if req, ok := in.Request.(*smithyhttp.Request); ok && req.ContentLength > 0 {
				c.sent.Add(req.ContentLength)
			}
			out, md, err := next.HandleDeserialize(ctx, in)
			if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp != nil && resp.Body != nil {
				resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.received}
			}
			return out, md, err
		}), middleware.After)
}

// sentPayload returns the message payload a send carries, as SQS bills it:
// every message's body and message attributes, summed over a batch.
func sentPayload(params any) (int, bool) {
	switch p := params.(type) {
	case *sqs.SendMessageInput:
		return wire.MessageSize(p.MessageBody, p.MessageAttributes), true
	case *sqs.SendMessageBatchInput:
		n := 0
		for _, e := range p.Entries {
			n += wire.MessageSize(e.MessageBody, e.MessageAttributes)
		}
		return n, true
	}
	return 0, false
}

// countingBody adds the bytes read through it to n.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.n.Add(int64(k))
	return k, err
}

// count adds calls and billed requests to operation op.
func (c *Counter) count(op string, calls, billed int64) {
	c.mu.Lock()
	if c.counts == nil {
		c.counts = make(map[string]int64)
		c.billed = make(map[string]int64)
	}
	if calls != 0 {
		c.counts[op] += calls
	}
	c.billed[op] += billed
	c.mu.Unlock()
}

// Add adds n to the count of operation op.
func (c *Counter) Add(op string, n int64) {
	c.mu.Lock()
	if c.counts == nil {
		c.counts = make(map[string]int64)
		c.billed = make(map[string]int64)
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
	return sum(c.counts)
}

// BilledTotal returns the requests SQS bills for all the calls counted
// by Register's middleware.
func (c *Counter) BilledTotal() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sum(c.billed)
}

func sum(byOp map[string]int64) int64 {
	var t int64
	for _, n := range byOp {
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

// Tally is what a Counter has counted at one moment.
type Tally struct {
	// Calls and Billed are the API calls and the requests SQS bills for
	// them, by operation.
	Calls, Billed map[string]int64
	// SentBytes and ReceivedBytes are the lengths of the HTTP request and
	// response bodies.
	SentBytes, ReceivedBytes int64
}

// Tally returns a copy of everything counted so far.
func (c *Counter) Tally() Tally {
	c.mu.Lock()
	t := Tally{Calls: maps.Clone(c.counts), Billed: maps.Clone(c.billed)}
	c.mu.Unlock()
	t.SentBytes, t.ReceivedBytes = c.sent.Load(), c.received.Load()
	return t
}

// Since returns what was counted between earlier and t: every figure of t
// less earlier's, operations whose counts did not change left out.
func (t Tally) Since(earlier Tally) Tally {
	diff := func(now, before map[string]int64) map[string]int64 {
		out := make(map[string]int64)
		for op, n := range now {
			if d := n - before[op]; d != 0 {
				out[op] = d
			}
		}
		return out
	}
	return Tally{Calls: diff(t.Calls, earlier.Calls), Billed: diff(t.Billed, earlier.Billed),
		SentBytes: t.SentBytes - earlier.SentBytes, ReceivedBytes: t.ReceivedBytes - earlier.ReceivedBytes}
}

// Reset sets every count to zero.
func (c *Counter) Reset() {
	c.mu.Lock()
	c.counts, c.billed = nil, nil
	c.sent.Store(0)
	c.received.Store(0)
	c.mu.Unlock()
}
