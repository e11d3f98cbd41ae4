package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/clock"
	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/redrive"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// TestPoisonRequestReplayedThenParked follows a request that always fails:
// the source queue's RedrivePolicy moves it to the dead-letter queue after
// 2 receives, the Redriver replays it with growing delays (1 s, then 2 s:
// the jitter is pinned to its ceiling), and after the second replay fails
// too it lands in the parking queue, its body and attributes intact.
func TestPoisonRequestReplayedThenParked(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		client, _ := b.Client(t)
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		dlq := createQueue(t, client, "dlq", nil)
		policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"2"}`, queueARN(t, client, dlq))
		src := createQueue(t, client, "src", map[string]string{"RedrivePolicy": policy})
		parking := createQueue(t, client, "parking", nil)

		type delivery struct {
			at      time.Time
			attempt string
		}
		var (
			mu         sync.Mutex
			deliveries []delivery
		)
		resp, err := responder.New(client, func(o *responder.Options) {
			o.BackoffBase = -1 // at once
			o.PollWaitTime = time.Second
			o.DrainTimeout = time.Second
		})
		if err != nil {
			t.Fatal(err)
		}
		serveCtx, stopServe := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() {
			served <- resp.Serve(serveCtx, src, responder.HandlerFunc(func(_ context.Context, req *responder.Request) (*responder.Reply, error) {
				if req.Body() != "poison" {
					t.Errorf("handler got body %q", req.Body())
				}
				mu.Lock()
				deliveries = append(deliveries, delivery{time.Now(), attrValue(req.Message, sqsapi.RedriveAttemptAttribute)})
				mu.Unlock()
				return nil, errors.New("cannot digest this")
			}))
		}()

		var rec observetest.Recorder
		rd, err := redrive.New(client, dlq, func(o *redrive.Options) {
			o.ParkingQueue = parking
			if b.Name == "fauxqs" {
				o.Target = src // fauxqs lacks ListDeadLetterSourceQueues
			}
			o.MaxAttempts = 2
			o.BackoffBase, o.BackoffCap = time.Second, 10*time.Second
			o.PollWaitTime = time.Second
			o.Observer = &rec
		}, redrive.WithClock(clock.Clock{Int64NFunc: func(n int64) int64 { return n - 1 }})) // always the ceiling
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stopRun := context.WithCancel(ctx)
		ran := make(chan error, 1)
		var rep redrive.Report
		go func() {
			var err error
			rep, err = rd.Run(runCtx)
			ran <- err
		}()

		attrs := map[string]types.MessageAttributeValue{
			sqsapi.RequestIDAttribute: strAttr("req-42"),
			"Tenant":                  strAttr("acme"),
			"Priority":                {DataType: aws.String("Number"), StringValue: aws.String("7")},
			"Blob":                    {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
		}
		sendMsg(t, client, src, "poison", attrs)

		parked := receiveAll(t, client, parking, 30*time.Second)
		stopRun()
		if err := <-ran; err != nil {
			t.Fatalf("Run: %v", err)
		}
		stopServe()
		if err := <-served; err != nil {
			t.Fatalf("Serve: %v", err)
		}

		if len(parked) != 1 {
			t.Fatalf("parking queue holds %d messages, want 1", len(parked))
		}
		m := parked[0]
		if aws.ToString(m.Body) != "poison" || attrValue(m, sqsapi.RedriveAttemptAttribute) != "2" {
			t.Errorf("parked message: body %q, attempt %q", aws.ToString(m.Body), attrValue(m, sqsapi.RedriveAttemptAttribute))
		}
		for name, want := range attrs {
			got, ok := m.MessageAttributes[name]
			if !ok || aws.ToString(got.DataType) != aws.ToString(want.DataType) || aws.ToString(got.StringValue) != aws.ToString(want.StringValue) || string(got.BinaryValue) != string(want.BinaryValue) {
				t.Errorf("attribute %s = %+v, want %+v", name, got, want)
			}
		}

		mu.Lock()
		defer mu.Unlock()
		var seen []string
		for _, d := range deliveries {
			seen = append(seen, d.attempt)
		}
		want := []string{"<none>", "<none>", "1", "1", "2", "2"}
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Fatalf("deliveries' attempt attributes = %v, want %v", seen, want)
		}
		// Growing delays: each round starts at least its replay delay after
		// the previous round's last failure.
		for round, delay := range []time.Duration{time.Second, 2 * time.Second} {
			gap := deliveries[2*round+2].at.Sub(deliveries[2*round+1].at)
			if gap < delay-50*time.Millisecond {
				t.Errorf("replay %d arrived %v after the failure, want at least %v", round+1, gap, delay)
			}
		}
		var actions []string
		events := redriven(t, &rec)
		for _, ev := range events {
			actions = append(actions, fmt.Sprintf("%s/%d/%v", ev.Action, ev.Attempt, ev.Delay))
			if ev.Err != nil || ev.RequestID != "req-42" {
				t.Errorf("event %+v", ev)
			}
		}
		if fmt.Sprint(actions) != "[replay/1/1s replay/2/2s park/2/0s]" || !errors.Is(events[2].Reason, redrive.ErrMaxAttempts) {
			t.Errorf("events = %v (last reason %v)", actions, events[len(events)-1].Reason)
		}
		if rep.Replayed != 2 || rep.Parked != 1 || rep.Failed != 0 || rep.Received != 3 {
			t.Errorf("report %+v", rep)
		}
		if c := counts(t, client, dlq); c != [3]int{} {
			t.Errorf("dead-letter queue counts %v, want empty", c)
		}
	})
}

// TestDryRunChangesNothing drains a dead-letter queue in a dry run: the
// report says what would happen, and every queue is as before.
func TestDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		client, counter := b.Client(t)
		dlq := createQueue(t, client, "dlq", nil)
		target := createQueue(t, client, "target", nil)
		parking := createQueue(t, client, "parking", nil)
		sendMsg(t, client, dlq, "a", nil)
		sendMsg(t, client, dlq, "b", map[string]types.MessageAttributeValue{sqsapi.RedriveAttemptAttribute: strAttr("1")})
		sendMsg(t, client, dlq, "c", map[string]types.MessageAttributeValue{sqsapi.RedriveAttemptAttribute: strAttr("3")})
		var rec observetest.Recorder
		rd, err := redrive.New(client, dlq, func(o *redrive.Options) {
			o.Target, o.ParkingQueue, o.MaxAttempts, o.DryRun = target, parking, 3, true
			o.Observer = &rec
		})
		if err != nil {
			t.Fatal(err)
		}
		counter.Reset()
		rep, err := rd.Drain(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if events := redriven(t, &rec); rep.Received != 3 || rep.Replayed != 2 || rep.Parked != 1 || len(events) != 3 {
			t.Errorf("report %+v, %d events", rep, len(events))
		}
		for _, op := range []string{"SendMessage", "SendMessageBatch", "DeleteMessage", "DeleteMessageBatch"} {
			if n := counter.Get(op); n != 0 {
				t.Errorf("dry run made %d %s calls", n, op)
			}
		}
		if c := counts(t, client, dlq); c != [3]int{3, 0, 0} {
			t.Errorf("dead-letter queue counts after the dry run %v, want 3 visible", c)
		}
		if c := counts(t, client, target); c != [3]int{} {
			t.Errorf("target counts %v", c)
		}
		if c := counts(t, client, parking); c != [3]int{} {
			t.Errorf("parking counts %v", c)
		}
		if _, err := rd.Run(context.Background()); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("Run in a dry run = %v", err)
		}
	})
}

// TestAttributeBudget: a message with 10 attributes has no room for the
// attempt count and is parked unchanged; one with 9 is replayed with 10.
func TestAttributeBudget(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		client, _ := b.Client(t)
		dlq := createQueue(t, client, "dlq", nil)
		target := createQueue(t, client, "target", nil)
		parking := createQueue(t, client, "parking", nil)
		full := map[string]types.MessageAttributeValue{}
		for i := range 10 {
			full[fmt.Sprint("a", i)] = strAttr("v")
		}
		nine := map[string]types.MessageAttributeValue{}
		for i := range 9 {
			nine[fmt.Sprint("a", i)] = strAttr("v")
		}
		sendMsg(t, client, dlq, "full", full)
		const trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
		if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String("nine"), MessageAttributes: nine,
			MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(trace)}}}); err != nil {
			t.Fatal(err)
		}
		var rec observetest.Recorder
		rd, err := redrive.New(client, dlq, func(o *redrive.Options) {
			o.Target, o.ParkingQueue, o.BackoffBase, o.BackoffCap = target, parking, time.Millisecond, time.Millisecond
			o.Observer = &rec
		})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := rd.Drain(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var reasons []error
		for _, ev := range redriven(t, &rec) {
			if ev.Action == "park" {
				reasons = append(reasons, ev.Reason)
			}
		}
		if rep.Parked != 1 || rep.Replayed != 1 || len(reasons) != 1 || !errors.Is(reasons[0], redrive.ErrNoRoom) || !strings.Contains(reasons[0].Error(), "has 10 other attributes") {
			t.Fatalf("report %+v, reasons %v", rep, reasons)
		}
		p := receiveAll(t, client, parking, 5*time.Second)
		if len(p) != 1 || aws.ToString(p[0].Body) != "full" || len(p[0].MessageAttributes) != 10 {
			t.Errorf("parked %+v", p)
		}
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(target), WaitTimeSeconds: 2,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAWSTraceHeader}})
		if err != nil {
			t.Fatal(err)
		}
		r := out.Messages
		if len(r) != 1 || aws.ToString(r[0].Body) != "nine" || len(r[0].MessageAttributes) != 10 || attrValue(r[0], sqsapi.RedriveAttemptAttribute) != "1" {
			t.Fatalf("replayed %+v", r)
		}
		// fauxqs ignores MessageSystemAttributes altogether.
		if got := r[0].Attributes["AWSTraceHeader"]; got != trace && b.Name != "fauxqs" {
			t.Errorf("AWSTraceHeader after the replay = %q, want %q", got, trace)
		}
	})
}

// TestCallsPerMessage measures the API calls of draining 25 messages:
// batches of 10 make 0.3 calls per message plus the final empty receive.
func TestCallsPerMessage(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		client, counter := b.Client(t)
		dlq := createQueue(t, client, "dlq", nil)
		target := createQueue(t, client, "target", nil)
		parking := createQueue(t, client, "parking", nil)
		for i := range 25 {
			sendMsg(t, client, dlq, fmt.Sprint("m", i), nil)
		}
		rd, err := redrive.New(client, dlq, func(o *redrive.Options) {
			o.Target, o.ParkingQueue, o.BackoffBase, o.BackoffCap = target, parking, time.Millisecond, time.Millisecond
		})
		if err != nil {
			t.Fatal(err)
		}
		counter.Reset()
		rep, err := rd.Drain(context.Background())
		if err != nil || rep.Replayed != 25 {
			t.Fatalf("Drain = %+v, %v", rep, err)
		}
		calls := counter.Snapshot()
		t.Logf("%s: draining 25 messages: %v, %.2f calls per message", b.Name, calls, float64(counter.Total())/25)
		if calls["SendMessageBatch"] != calls["DeleteMessageBatch"] || calls["SendMessage"]+calls["DeleteMessage"] != 0 {
			t.Errorf("calls %v: want batch calls only, one delete per send", calls)
		}
		if b.Name == "sqstest" && (calls["ReceiveMessage"] != 4 || calls["SendMessageBatch"] != 3) {
			t.Errorf("calls %v, want 4 receives and 3 batches of sends and of deletes", calls)
		}
		if got := receiveAll(t, client, target, 5*time.Second); len(got) != 25 {
			t.Errorf("target holds %d messages", len(got))
		}
	})
}

// TestTargetFromSourceQueues finds the target with
// ListDeadLetterSourceQueues (sqstest: fauxqs lacks the call).
func TestTargetFromSourceQueues(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	client, _ := b.Client(t)
	ctx := context.Background()
	dlq := createQueue(t, client, "dlq", nil)
	parking := createQueue(t, client, "parking", nil)
	newRedriver := func() *redrive.Redriver {
		rd, err := redrive.New(client, dlq, func(o *redrive.Options) { o.ParkingQueue = parking })
		if err != nil {
			t.Fatal(err)
		}
		return rd
	}
	if _, err := newRedriver().Target(ctx); !errors.Is(err, redrive.ErrNoSource) {
		t.Fatalf("no source: %v", err)
	}
	policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":3}`, queueARN(t, client, dlq))
	src := createQueue(t, client, "src", map[string]string{"RedrivePolicy": policy})
	if got, err := newRedriver().Target(ctx); err != nil || got != src {
		t.Fatalf("Target = %q, %v; want %q", got, err, src)
	}
	createQueue(t, client, "src2", map[string]string{"RedrivePolicy": policy})
	_, err := newRedriver().Target(ctx)
	if !errors.Is(err, redrive.ErrAmbiguousSource) || !strings.Contains(err.Error(), src) {
		t.Fatalf("two sources: %v", err)
	}
	if _, err := newRedriver().Drain(ctx); !errors.Is(err, redrive.ErrAmbiguousSource) {
		t.Fatalf("Drain with two sources: %v", err)
	}
}

// TestMissingTargetStopsTheRun: a call-level error that retrying cannot
// fix ends Drain with the error, and the message stays.
func TestMissingTargetStopsTheRun(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	client, _ := b.Client(t)
	dlq := createQueue(t, client, "dlq", nil)
	parking := createQueue(t, client, "parking", nil)
	sendMsg(t, client, dlq, "m", nil)
	gone := b.Endpoint + "/000000000000/no-such-queue"
	rd, err := redrive.New(client, dlq, func(o *redrive.Options) { o.Target, o.ParkingQueue = gone, parking })
	if err != nil {
		t.Fatal(err)
	}
	rep, err := rd.Drain(context.Background())
	if !awserr.IsQueueDoesNotExist(err) || !strings.Contains(err.Error(), "SendMessageBatch") || rep.Failed != 1 {
		t.Fatalf("Drain = %+v, %v", rep, err)
	}
	if c := counts(t, client, dlq); c[0]+c[1] != 1 {
		t.Fatalf("dead-letter queue counts %v: the message must stay", c)
	}
}

func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	client := sqs.New(sqs.Options{Region: "us-east-1"})
	const q = "https://sqs.us-east-1.amazonaws.com/1/q"
	cases := map[string]struct {
		dlq string
		fn  func(*redrive.Options)
	}{
		"no dlq":         {"", func(o *redrive.Options) { o.ParkingQueue = q + "p" }},
		"no parking":     {q, func(o *redrive.Options) {}},
		"parking is dlq": {q, func(o *redrive.Options) { o.ParkingQueue = q }},
		"target is dlq":  {q, func(o *redrive.Options) { o.ParkingQueue, o.Target = q+"p", q }},
		"virtual target": {q, func(o *redrive.Options) { o.ParkingQueue, o.Target = q+"p", q+"x#v" }},
		"cap < base": {q, func(o *redrive.Options) {
			o.ParkingQueue, o.BackoffBase, o.BackoffCap = q+"p", time.Minute, time.Second
		}},
		"cap too big":   {q, func(o *redrive.Options) { o.ParkingQueue, o.BackoffCap = q+"p", 25*time.Hour }},
		"negative max":  {q, func(o *redrive.Options) { o.ParkingQueue, o.MaxAttempts = q+"p", -1 }},
		"negative rate": {q, func(o *redrive.Options) { o.ParkingQueue, o.RateLimit = q+"p", -1 }},
		"wait 30s":      {q, func(o *redrive.Options) { o.ParkingQueue, o.PollWaitTime = q+"p", 30*time.Second }},
	}
	for name, c := range cases {
		_, err := redrive.New(client, c.dlq, c.fn)
		var ie *sqsapi.InvalidInputError
		if !errors.As(err, &ie) || !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: New = %v, want *sqsapi.InvalidInputError", name, err)
		}
	}
	if _, err := redrive.New(nil, q, func(o *redrive.Options) { o.ParkingQueue = q + "p" }); !errors.Is(err, sqsapi.ErrInvalidInput) {
		t.Errorf("nil client: %v", err)
	}
}

// TestRateLimit: 30 messages at 20 per second take at least a second
// (the first batch of 10 goes at once).
// TestRateLimit runs in a synctest bubble: the pace it checks is the
// bubble's clock.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testRateLimit)
}

func testRateLimit(t *testing.T) {
	b := sqstestenv.InProcess(t)
	client, _ := b.Client(t)
	dlq := createQueue(t, client, "dlq", nil)
	target := createQueue(t, client, "target", nil)
	parking := createQueue(t, client, "parking", nil)
	for i := range 30 {
		sendMsg(t, client, dlq, fmt.Sprint("m", i), nil)
	}
	rd, err := redrive.New(client, dlq, func(o *redrive.Options) {
		o.Target, o.ParkingQueue, o.BackoffBase, o.BackoffCap, o.RateLimit = target, parking, time.Millisecond, time.Millisecond, 20
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, err := rd.Drain(context.Background())
	if err != nil || rep.Replayed != 30 {
		t.Fatalf("Drain = %+v, %v", rep, err)
	}
	// 10 at once, then 10 received after 0.5 s and 10 after 1 s; the
	// final empty receive goes after 1.5 s and waits 1 s more.
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("30 messages at 20/s drained in %v", d)
	}
}
