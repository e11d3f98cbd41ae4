package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/virtualqueue"
)

// MaxIdleScale is the largest IdleConfig.Scale: the 20 s long poll of an
// idle responder cannot be shortened below SQS's minimum of 1 s.
const MaxIdleScale = 20

// measureIdle leaves a requester (after one request, so its host queue
// exists, and two sweep periods of start-up) and a responder (serving an
// empty queue) alone for the window,
// with every period of the library divided by the scale, and counts their
// API calls. The requester is alone in its fleet, so it also holds the
// sweeper lease and sweeps every period: the most a requester pays.
func measureIdle(ctx context.Context, e *env) (*IdleResult, error) {
	k := e.cfg.Idle.Scale
	if k > MaxIdleScale {
		return nil, fmt.Errorf("idle scale %d above %d", k, MaxIdleScale)
	}
	scaled := func(d time.Duration) time.Duration { return (d / time.Duration(k)).Truncate(time.Second) }
	retention := scaled(wire.DefaultIdleQueueRetention)
	period := max(scaled(5*time.Minute), 2*time.Second) // reaper's default period, and its minimum
	wait := scaled(wire.MaxWaitTimeSeconds * time.Second)

	reqCounter, respCounter := new(callcount.Counter), new(callcount.Counter)
	reqClient, respClient := e.cfg.NewClient(reqCounter), e.cfg.NewClient(respCounter)
	queueURL, err := createQueue(ctx, respClient, e.queueName("idle-requests"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = deleteQueues(context.WithoutCancel(ctx), respClient, queueURL) }()

	resp, err := responder.New(respClient, func(o *responder.Options) {
		o.PollWaitTime = wait
		o.AllowReplyTo = []string{e.prefix + "idle-"} // the requester's Prefix
	})
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- resp.Serve(context.Background(), queueURL, responder.HandlerFunc(echo)) }()
	req, err := requester.New(reqClient, func(o *requester.Options) {
		o.Prefix = e.prefix + "idle-"
		o.IdleQueueRetention = retention
		o.SweepPeriod = period
		o.PollWaitTime = wait
	})
	if err != nil {
		return nil, errors.Join(err, stopResponder(ctx, resp, served))
	}
	_, err = req.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("wake")})
	if err == nil {
		// Let the start-up pass before the window: the reply's delete, the
		// first heartbeat and the sweeper lease's first rounds (a new fleet
		// checks for a missing token, creates it and sweeps at once), which
		// a process pays once, not per hour. The lease polls once in each
		// period's window, so two periods cover it. A window shorter than
		// a period (a smoke run) cannot see sweeps anyway: a second then.
		settle := time.Second
		if e.cfg.Idle.Window >= period {
			settle = 2 * period
		}
		err = sleep(ctx, settle)
	}
	var res *IdleResult
	if err == nil {
		reqBefore, respBefore := reqCounter.Snapshot(), respCounter.Snapshot()
		err = sleep(ctx, e.cfg.Idle.Window)
		res = &IdleResult{
			Window: e.cfg.Idle.Window, Scale: k,
			RequesterCalls: delta(reqBefore, reqCounter.Snapshot()),
			ResponderCalls: delta(respBefore, respCounter.Snapshot()),
		}
		hours := (e.cfg.Idle.Window * time.Duration(k)).Hours()
		res.RequesterPerHour = float64(sum(res.RequesterCalls)) / hours
		res.ResponderPerHour = float64(sum(res.ResponderCalls)) / hours
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = errors.Join(err, req.Close(cctx), stopResponder(cctx, resp, served))
	if err != nil {
		return nil, err
	}
	return res, nil
}

func stopResponder(ctx context.Context, resp *responder.Responder, served chan error) error {
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := resp.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = nil // the idle long poll was cut short, as intended
	}
	return errors.Join(err, <-served)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func delta(before, after map[string]int64) map[string]int64 {
	d := make(map[string]int64)
	for op, n := range after {
		if n-before[op] != 0 {
			d[op] = n - before[op]
		}
	}
	return d
}

func sum(m map[string]int64) int64 {
	var t int64
	for _, n := range m {
		t += n
	}
	return t
}

// memHost answers the one call a virtual-queue client makes for an idle
// host: the host's attributes. Any other call would panic on the nil
// embedded client, and none is made.
type memHost struct{ sqsapi.Client }

func (memHost) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"VisibilityTimeout": "30"}}, nil
}

// bytesPerIdleQueue creates n idle virtual queues as a requester does (a
// UUID name, the default retention) and returns the heap growth per queue,
// the names included.
func bytesPerIdleQueue(n int) (float64, error) {
	const host = "https://sqs.us-east-1.amazonaws.com/123456789012/__RequesterClientQueues__0123456789abcdef0123456789abcdef0123-0"
	c, err := virtualqueue.New(memHost{})
	if err != nil {
		return 0, err
	}
	defer c.Close(context.Background())
	create := func(name string) error {
		_, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{
			sqsapi.HostQueueURLAttribute:             host,
			sqsapi.IdleQueueRetentionPeriodAttribute: "300",
		}})
		return err
	}
	if err := create("warm-up"); err != nil {
		return 0, err
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		// The name is counted: the queue keeps it.
		if err := create(uuid.NewString()); err != nil {
			return 0, err
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n), nil
}
