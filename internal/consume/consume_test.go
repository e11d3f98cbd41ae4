package consume

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/backoff"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// rig is a queue on an in-process sqstest server and a Config that
// consumes it. Every test of the engine runs in a testing/synctest bubble
// (synctest.Test), where the server, the engine and the handlers share a clock
// that moves only when all of them wait.
type rig struct {
	client *sqs.Client
	queue  string
	cfg    Config
}

func newRig(t *testing.T, visibility time.Duration) *rig {
	t.Helper()
	client, _ := sqstestenv.InProcess(t).Client(t)
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, "q"))})
	if err != nil {
		t.Fatal(err)
	}
	dels, vis := batch.NewDeletes(client, 2, batch.DeleteLinger), batch.NewVisibilities(client, 2)
	t.Cleanup(func() { _ = dels.Close(context.Background()); _ = vis.Close(context.Background()) })
	return &rig{client: client, queue: *out.QueueUrl, cfg: Config{
		Name: "test", Client: client, QueueURL: *out.QueueUrl,
		MaxConcurrency: 4, MaxPollers: 2, PollWaitTime: time.Second, VisibilityTimeout: visibility,
		DrainTimeout: 5 * time.Second, MaxVisibility: 12 * time.Hour,
		Deletes: dels, Visibility: vis, Counters: new(Counters),
		Backoff: backoff.Policy{Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond},
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Latency: func() time.Duration { return time.Millisecond },
		Key:     func(m types.Message) string { return aws.ToString(m.Body) },
	}}
}

func (g *rig) send(t *testing.T, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := g.client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &g.queue, MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
}

// depth is the queue's visible and in-flight message counts.
func (g *rig) depth(t *testing.T) (visible, inFlight string) {
	t.Helper()
	out, err := g.client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &g.queue,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"], out.Attributes["ApproximateNumberOfMessagesNotVisible"]
}

// run runs the engine until stop is called, which returns Run's error.
func (g *rig) run(h Handler) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, g.cfg, h) }()
	return func() error { cancel(); return <-done }
}

// TestOutcomesAreCarriedOut checks that a message its handler deletes is
// deleted, one it releases comes back, and one it leaves stays in flight.
func TestOutcomesAreCarriedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t, 30*time.Second)
		g.send(t, "delete", "release", "leave")
		var mu sync.Mutex
		seen := map[string]int{}
		var told []string // OnRelease's reports, "body reason"
		g.cfg.OnRelease = func(m types.Message, _ time.Duration, reason string) {
			mu.Lock()
			told = append(told, aws.ToString(m.Body)+" "+reason)
			mu.Unlock()
		}
		all := make(chan struct{})
		stop := g.run(func(_ context.Context, d *Delivery) Outcome {
			body := aws.ToString(d.Message.Body)
			mu.Lock()
			defer mu.Unlock()
			seen[body]++
			if seen["delete"] == 1 && seen["release"] == 2 && seen["leave"] == 1 && len(seen) == 3 {
				close(all)
			}
			switch body {
			case "delete":
				return Outcome{Action: Delete}
			case "release":
				if seen[body] == 1 {
					return Outcome{Action: Release, Reason: "again"}
				}
				return Outcome{Action: Delete}
			}
			return Outcome{Action: Leave}
		})
		select {
		case <-all:
		case <-time.After(20 * time.Second):
			mu.Lock()
			t.Fatalf("handled %v; want delete once, release twice, leave once", seen)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if v, f := g.depth(t); v != "0" || f != "1" {
			t.Errorf("queue: %s visible, %s in flight; want only the left message, in flight", v, f)
		}
		n := g.cfg.Counters
		if n.Deleted.Load() != 2 || n.Released.Load() != 1 || n.Received.Load() != 4 {
			t.Errorf("counters: deleted %d, released %d, received %d; want 2, 1, 4", n.Deleted.Load(), n.Released.Load(), n.Received.Load())
		}
		mu.Lock()
		defer mu.Unlock()
		if len(told) != 1 || told[0] != "release again" {
			t.Errorf("OnRelease told %q, want the one release with its reason", told)
		}
	})
}

// TestExtenderExtendsAndRenews checks that a handler running past its
// visibility timeout keeps its message, and that its lease is renewed
// after each extension.
func TestExtenderExtendsAndRenews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t, time.Second)
		var renewals sync.Map
		g.cfg.Renew = func(_ context.Context, d *Delivery, lease string) { renewals.Store(lease, true) }
		g.send(t, "slow")
		var runs sync.Map
		done := make(chan struct{})
		stop := g.run(func(ctx context.Context, d *Delivery) Outcome {
			if _, again := runs.LoadOrStore(aws.ToString(d.Message.MessageId), true); again {
				t.Error("the message was received again while its handler ran")
			}
			d.SetLease("lease-1")
			testtime.Pause(3 * time.Second) // three visibility timeouts
			close(done)
			return Outcome{Action: Delete}
		})
		<-done
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := g.cfg.Counters.Extended.Load(); n < 2 {
			t.Errorf("%d extensions, want at least 2 in three visibility timeouts", n)
		}
		if _, ok := renewals.Load("lease-1"); !ok {
			t.Error("the lease was not renewed")
		}
	})
}

// TestHardStopAbandonsAndReleases checks that a handler still running at
// the hard stop is cancelled with ErrClosed, and its message released.
func TestHardStopAbandonsAndReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t, 30*time.Second)
		stopping, hard := make(chan struct{}), make(chan struct{})
		g.cfg.Stopping, g.cfg.HardStop = stopping, hard
		reasons := make(chan string, 2)
		g.cfg.OnRelease = func(_ types.Message, _ time.Duration, reason string) { reasons <- reason }
		g.send(t, "stuck")
		started := make(chan struct{})
		var cause error
		done := make(chan error, 1)
		go func() {
			done <- Run(context.Background(), g.cfg, func(ctx context.Context, d *Delivery) Outcome {
				close(started)
				<-ctx.Done()
				cause = context.Cause(ctx)
				if d.Finish() {
					t.Error("Finish succeeded on an abandoned delivery")
				}
				return Outcome{Action: Delete}
			})
		}()
		<-started
		close(stopping)
		close(hard)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !errors.Is(cause, sqsapi.ErrClosed) {
			t.Errorf("cause %v, want ErrClosed", cause)
		}
		if n := g.cfg.Counters.Abandoned.Load(); n != 1 {
			t.Errorf("%d abandoned, want 1", n)
		}
		if n := g.cfg.Counters.Released.Load(); n != 1 {
			t.Errorf("%d released, want 1", n)
		}
		if r := <-reasons; r != ReasonStopping {
			t.Errorf("OnRelease told %q, want %q", r, ReasonStopping)
		}
		// Released as soon as no long poll the stop cancelled can take it:
		// within the poll's wait (1 s) and the margin (2 s).
		testtime.Advance(3 * time.Second)
		if v, f := g.depth(t); v != "1" {
			t.Fatalf("%s visible (%s in flight) 3 s after the stop, want the released message", v, f)
		}
	})
}

// TestHardStopKeepsWhatCannotMove checks that a delivery marked
// KeepWhenAbandoned is cancelled at the hard stop but not released: its
// handler's decision (here, delete) still counts.
func TestHardStopKeepsWhatCannotMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t, 30*time.Second)
		stopping, hard := make(chan struct{}), make(chan struct{})
		g.cfg.Stopping, g.cfg.HardStop = stopping, hard
		g.send(t, "session")
		started := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- Run(context.Background(), g.cfg, func(ctx context.Context, d *Delivery) Outcome {
				d.KeepWhenAbandoned()
				close(started)
				<-ctx.Done()
				if !errors.Is(context.Cause(ctx), sqsapi.ErrClosed) {
					t.Errorf("cause %v, want ErrClosed", context.Cause(ctx))
				}
				return Outcome{Action: Delete}
			})
		}()
		<-started
		close(stopping)
		close(hard)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := g.cfg.Counters.Released.Load(); n != 0 {
			t.Errorf("%d released, want 0", n)
		}
		if err := g.cfg.Deletes.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if v, f := g.depth(t); v != "0" || f != "0" {
			t.Errorf("%s visible and %s in flight after the stop, want the message deleted", v, f)
		}
	})
}

// TestMissingQueueEndsTheRun checks that Run returns the queue's absence.
func TestMissingQueueEndsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t, 30*time.Second)
		g.cfg.QueueURL += "-gone"
		g.cfg.DrainTimeout = 0
		err := Run(context.Background(), g.cfg, func(context.Context, *Delivery) Outcome { return Outcome{} })
		var gone *types.QueueDoesNotExist
		if !errors.As(err, &gone) {
			t.Fatalf("Run = %v, want *types.QueueDoesNotExist", err)
		}
	})
}
