package redrive_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/redrive"
)

// TestIdleRunStopsPromptly: cancelling an idle Run (default 20 s long
// polls) is a graceful stop that returns nil well before the poll's wait
// ends. It runs in a synctest bubble on an in-process sqstest: the time it
// takes is the bubble's, at most the half second a parked poll is given.
func TestIdleRunStopsPromptly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		client, _ := sqstestenv.InProcess(t).Client(t)
		dlq := createQueue(t, client, "dlq", nil)
		target := createQueue(t, client, "target", nil)
		parking := createQueue(t, client, "parking", nil)
		rd, err := redrive.New(client, dlq, func(o *redrive.Options) { o.Target, o.ParkingQueue = target, parking })
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := rd.Run(ctx)
			errc <- err
		}()
		testtime.Advance(time.Second) // the long poll is parked
		begun := time.Now()
		cancel()
		err = <-errc
		took := time.Since(begun)
		t.Logf("idle Run stopped in %v", took.Round(time.Millisecond))
		if err != nil {
			t.Errorf("Run = %v, want nil after a stop", err)
		}
		if took > time.Second {
			t.Errorf("idle Run took %v to stop", took)
		}
	})
}

// gatedClient holds its first receive until gate is closed.
type gatedClient struct {
	redrive.Client
	called, gate chan struct{}
	first        bool
}

func (c *gatedClient) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if !c.first {
		c.first = true
		close(c.called)
		<-c.gate
	}
	return c.Client.ReceiveMessage(ctx, in, o...)
}

// TestStopReleasesWhatAStoppedReceiveGot: messages a receive returns after
// the stop are made visible again at once, not replayed.
func TestStopReleasesWhatAStoppedReceiveGot(t *testing.T) {
	t.Parallel()
	b := sqstestenv.SQSTest(t)
	client, _ := b.Client(t)
	dlq := createQueue(t, client, "dlq", map[string]string{"VisibilityTimeout": "60"})
	target := createQueue(t, client, "target", nil)
	parking := createQueue(t, client, "parking", nil)
	sendMsg(t, client, dlq, "m", nil)
	gc := &gatedClient{Client: client, called: make(chan struct{}), gate: make(chan struct{})}
	rd, err := redrive.New(gc, dlq, func(o *redrive.Options) { o.Target, o.ParkingQueue = target, parking })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		rep redrive.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := rd.Run(ctx)
		done <- result{rep, err}
	}()
	<-gc.called
	cancel()
	close(gc.gate) // the receive goes out after the stop, within the grace period
	res := <-done
	if res.err != nil || res.rep.Received != 0 || res.rep.Replayed != 0 {
		t.Fatalf("Run = %+v, %v: want nil and nothing replayed", res.rep, res.err)
	}
	if c := counts(t, client, dlq); c[0] != 1 || c[1] != 0 {
		t.Fatalf("dead-letter queue counts %v: the message must be visible again at once", c)
	}
	if c := counts(t, client, target); c[0]+c[1]+c[2] != 0 {
		t.Fatalf("target counts %v: nothing may be replayed after the stop", c)
	}
	// Drain stopped by its context reports it did not finish.
	dctx, dcancel := context.WithCancel(context.Background())
	dcancel()
	if _, err := rd.Drain(dctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Drain = %v, want context.Canceled", err)
	}
}
