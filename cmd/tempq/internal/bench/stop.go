package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/tempqueue"
	"github.com/tempqueues/tempqueues/virtualqueue"
)

// The idle clients whose stop is timed, in the order of the report.
const (
	StopRequester         = "requester"          // requester.Requester.Close
	StopVirtualQueue      = "virtualqueue"       // virtualqueue.Client.Close
	StopTempQueue         = "tempqueue"          // tempqueue.Client.Close
	StopResponderShutdown = "responder-shutdown" // responder.Responder.Shutdown
	StopResponderCancel   = "responder-cancel"   // cancelling Serve's context
)

// StopComponents lists every idle client whose stop is timed.
var StopComponents = []string{StopRequester, StopVirtualQueue, StopTempQueue, StopResponderShutdown, StopResponderCancel}

// stopCall names the call each component's figure times.
var stopCall = map[string]string{
	StopRequester:         "Close",
	StopVirtualQueue:      "Close, until a waiting ReceiveMessage returns",
	StopTempQueue:         "Close (deletes its host queue)",
	StopResponderShutdown: "Shutdown, until Serve returns",
	StopResponderCancel:   "cancel Serve's context, until Serve returns",
}

// StopLimit is the lifecycle contract's bound on the stop of an idle
// client (docs/semantics.md, "Shutdown"; docs/architecture.md).
const StopLimit = time.Second

// StopConfig configures the measurement of how fast idle clients stop.
// Every client runs with the library's default options (20 s long polls,
// sweeping on), so that a long poll is parked on the server when the stop
// begins.
type StopConfig struct {
	// Idle is how long each client is left alone after its warm-up and
	// before its stop; 0 skips the measurement.
	Idle time.Duration
	// Timeout is the deadline of the context given to each stop; default
	// 10s.
	Timeout time.Duration
}

// StopResult is the stop of one idle client over the rounds.
type StopResult struct {
	// Samples are the stop times in milliseconds, one per round, in order.
	Samples []float64 `json:"samples"`
	Max     float64   `json:"max"`
	Median  float64   `json:"median"`
	// Errors counts stops that returned an error (or Serve calls that
	// returned one, or never returned); FirstError is the first.
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// Calls are the API calls made while stopping, over all rounds.
	Calls map[string]int64 `json:"calls"`
}

// stopSample is one timed stop.
type stopSample struct {
	took  time.Duration
	err   error
	calls map[string]int64
}

// stopResult summarizes samples: the largest and the median (nearest rank)
// stop time, the errors and the calls.
func stopResult(samples []stopSample) *StopResult {
	res := &StopResult{Calls: make(map[string]int64)}
	d := make([]time.Duration, 0, len(samples))
	for _, s := range samples {
		res.Samples = append(res.Samples, ms(s.took))
		d = append(d, s.took)
		if s.err != nil {
			res.Errors++
			if res.FirstError == "" {
				res.FirstError = s.err.Error()
			}
		}
		for op, n := range s.calls {
			res.Calls[op] += n
		}
	}
	slices.Sort(d)
	if len(d) > 0 {
		res.Max = ms(d[len(d)-1])
		res.Median = ms(sortedPercentile(d, 0.5))
	}
	return res
}

// measureStops times the stop of each idle client once per round.
func measureStops(ctx context.Context, e *env) (map[string]*StopResult, error) {
	cfg := e.cfg
	samples := make(map[string][]stopSample)
	for round := range cfg.Rounds {
		for _, name := range StopComponents {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			counter := new(callcount.Counter)
			s, err := stopOnce(ctx, e, name, cfg.NewClient(counter), counter)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", name, round+1, err)
			}
			samples[name] = append(samples[name], s)
			status := "ok"
			if s.err != nil {
				status = "error: " + s.err.Error()
			}
			fmt.Fprintf(cfg.Progress, "stop round %d/%d  %-18s %8.2f ms  %s\n", round+1, cfg.Rounds, name, ms(s.took), status)
		}
	}
	out := make(map[string]*StopResult, len(samples))
	for name, s := range samples {
		out[name] = stopResult(s)
	}
	return out, nil
}

// stopOnce sets up the idle client name on client, leaves it alone for
// the idle time and times its stop. An error of the stop is in the sample;
// the returned error is one of the set-up, which ends the run.
func stopOnce(ctx context.Context, e *env, name string, client *sqs.Client, counter *callcount.Counter) (stopSample, error) {
	switch name {
	case StopRequester:
		return stopRequester(ctx, e, client, counter)
	case StopVirtualQueue:
		return stopVirtualQueue(ctx, e, client, counter)
	case StopTempQueue:
		return stopTempQueue(ctx, e, client, counter)
	case StopResponderShutdown:
		return stopIdleResponder(ctx, e, client, counter, false)
	case StopResponderCancel:
		return stopIdleResponder(ctx, e, client, counter, true)
	}
	return stopSample{}, fmt.Errorf("unknown component %q", name)
}

// timeStop runs stop after the idle time under a context with the stop
// deadline, and records its duration, its error and the calls made
// meanwhile.
func timeStop(ctx context.Context, e *env, counter *callcount.Counter, stop func(context.Context) error) (stopSample, error) {
	if err := sleep(ctx, e.cfg.Stop.Idle); err != nil {
		return stopSample{}, err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.Stop.Timeout)
	defer cancel()
	before := counter.Snapshot()
	start := time.Now()
	err := stop(sctx)
	took := time.Since(start)
	return stopSample{took: took, err: err, calls: delta(before, counter.Snapshot())}, nil
}

// offClock bounds the clean-up that follows a timed stop.
func offClock(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}

// stopRequester makes one RPC to an echo responder, then times the idle
// requester's Close. The requester has the default options (a 20 s long
// poll, sweeping on) and a prefix of its own.
func stopRequester(ctx context.Context, e *env, client *sqs.Client, counter *callcount.Counter) (s stopSample, err error) {
	queueURL, err := createQueue(ctx, client, e.queueName("stop-requests"))
	if err != nil {
		return s, err
	}
	// The echo responder has a client of its own, so that its calls are
	// not counted as the requester's.
	resp, err := responder.New(e.cfg.NewClient(new(callcount.Counter)), func(o *responder.Options) {
		o.AllowReplyTo = []string{e.prefix + "stop-"} // the requester's Prefix
	})
	if err != nil {
		return s, errors.Join(err, deleteQueues(context.WithoutCancel(ctx), client, queueURL))
	}
	served := make(chan error, 1)
	go func() { served <- resp.Serve(context.Background(), queueURL, responder.HandlerFunc(echo)) }()
	defer func() {
		cctx, cancel := offClock(ctx)
		defer cancel()
		err = errors.Join(err, resp.Shutdown(cctx), <-served, deleteQueues(cctx, client, queueURL))
	}()
	req, err := requester.New(client, func(o *requester.Options) { o.Prefix = e.prefix + "stop-" })
	if err != nil {
		return s, err
	}
	m, err := req.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("wake")})
	if err == nil {
		err = checkReply("wake", m.Body)
	}
	if err != nil {
		cctx, cancel := offClock(ctx)
		defer cancel()
		return s, errors.Join(err, req.Close(cctx))
	}
	return timeStop(ctx, e, counter, req.Close)
}

// sendReceive sends body to a virtual queue and receives and deletes it
// through c, so that a host poller has run.
func sendReceive(ctx context.Context, c *virtualqueue.Client, queueURL, body string) error {
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)}); err != nil {
		return err
	}
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 1, WaitTimeSeconds: 10})
	if err != nil {
		return err
	}
	if len(out.Messages) != 1 {
		return fmt.Errorf("received %d messages from %s, want 1", len(out.Messages), queueURL)
	}
	if err := checkReply(body, out.Messages[0].Body); err != nil {
		return err
	}
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: out.Messages[0].ReceiptHandle})
	return err
}

// stopVirtualQueue makes a virtual queue on a host queue of its own, sends
// and receives one message, and leaves a consumer waiting in ReceiveMessage
// on the queue, so that a host poller is parked in a long poll: by default
// a virtual-queue client polls only while someone waits. It then times the
// client's Close until the waiting consumer has returned too.
func stopVirtualQueue(ctx context.Context, e *env, client *sqs.Client, counter *callcount.Counter) (s stopSample, err error) {
	hostURL, err := createQueue(ctx, client, e.queueName("stop-host"))
	if err != nil {
		return s, err
	}
	defer func() {
		cctx, cancel := offClock(ctx)
		defer cancel()
		err = errors.Join(err, deleteQueues(cctx, client, hostURL))
	}()
	c, err := virtualqueue.New(client)
	if err != nil {
		return s, err
	}
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("stop"),
		Attributes: map[string]string{sqsapi.HostQueueURLAttribute: hostURL}})
	if err == nil {
		err = sendReceive(ctx, c, aws.ToString(out.QueueUrl), "stop")
	}
	if err != nil {
		cctx, cancel := offClock(ctx)
		defer cancel()
		return s, errors.Join(err, c.Close(cctx))
	}
	// The consumer receives until Close makes its receive fail, however
	// long the idle time; it gets no message, as none is sent.
	waiting := make(chan error, 1)
	go func() {
		for {
			out, err := c.ReceiveMessage(context.WithoutCancel(ctx), &sqs.ReceiveMessageInput{QueueUrl: out.QueueUrl, WaitTimeSeconds: wire.MaxWaitTimeSeconds})
			if err == nil && len(out.Messages) > 0 {
				err = fmt.Errorf("the waiting consumer received %d unexpected messages", len(out.Messages))
			}
			if err != nil {
				waiting <- err
				return
			}
		}
	}()
	return timeStop(ctx, e, counter, func(ctx context.Context) error {
		err := c.Close(ctx)
		select {
		case werr := <-waiting:
			if !errors.Is(werr, sqsapi.ErrClosed) {
				err = errors.Join(err, fmt.Errorf("the waiting consumer: %w", werr))
			}
			return err
		case <-ctx.Done():
			return errors.Join(err, errors.New("the waiting consumer's ReceiveMessage had not returned by the stop's deadline"))
		}
	})
}

// stopTempQueue creates a temporary queue, sends and receives one message,
// then times the idle client's Close, which deletes its host queue.
func stopTempQueue(ctx context.Context, e *env, client *sqs.Client, counter *callcount.Counter) (s stopSample, err error) {
	c, err := tempqueue.New(client, func(o *tempqueue.Options) { o.Prefix = e.prefix + "stop-tq-" })
	if err != nil {
		return s, err
	}
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("stop")})
	if err == nil {
		err = sendReceive(ctx, c.Client, aws.ToString(out.QueueUrl), "stop")
	}
	if err != nil {
		cctx, cancel := offClock(ctx)
		defer cancel()
		return s, errors.Join(err, c.Close(cctx))
	}
	return timeStop(ctx, e, counter, c.Close)
}

// stopIdleResponder serves an empty queue with a responder of default options
// and times its stop: Shutdown (until it and Serve have returned), or with
// byCancel the cancellation of Serve's context (until Serve has returned).
// Serve must return nil either way.
func stopIdleResponder(ctx context.Context, e *env, client *sqs.Client, counter *callcount.Counter, byCancel bool) (s stopSample, err error) {
	queueURL, err := createQueue(ctx, client, e.queueName("stop-empty"))
	if err != nil {
		return s, err
	}
	resp, err := responder.New(client)
	if err != nil {
		return s, errors.Join(err, deleteQueues(context.WithoutCancel(ctx), client, queueURL))
	}
	sctx, cancelServe := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelServe()
	served := make(chan error, 1)
	go func() { served <- resp.Serve(sctx, queueURL, responder.HandlerFunc(echo)) }()
	defer func() {
		// After a cancelled Serve the responder itself still has to be
		// shut down; after a cut-short idle time, Serve too.
		cctx, cancel := offClock(ctx)
		defer cancel()
		errs := []error{err, resp.Shutdown(cctx)}
		if served != nil {
			errs = append(errs, <-served)
		}
		err = errors.Join(append(errs, deleteQueues(cctx, client, queueURL))...)
	}()
	// waitServe waits for Serve until ctx ends, and a second more: the
	// stop is then far over its limit, and an error says so.
	waitServe := func(ctx context.Context) error {
		t := time.NewTimer(time.Second)
		defer t.Stop()
		var err error
		select {
		case err = <-served:
		case <-ctx.Done():
			select {
			case err = <-served:
			case <-t.C:
				// Leave it behind: the run ends with the process.
				err = fmt.Errorf("the Serve loop still running a second after the stop's deadline: %w", ctx.Err())
			}
		}
		served = nil
		return err
	}
	return timeStop(ctx, e, counter, func(ctx context.Context) error {
		if byCancel {
			cancelServe()
			return waitServe(ctx)
		}
		return errors.Join(resp.Shutdown(ctx), waitServe(ctx))
	})
}
