package integration_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/leakcheck"
	"github.com/tempqueues/tempqueues/internal/testkit/observetest"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
)

// Sessions (requester.OpenSession) when one of their processes dies: the
// other side ends with a clear error or at its deadline, nothing waits
// forever, and the request is finished, not dead-lettered.

// childSessionResponder serves sessions on CHILD_QUEUE: it answers each
// message the caller streams with its body in upper case and its pid,
// and prints "start <id>" when a run starts and "end <id> <cause>" when
// the caller went away.
func childSessionResponder() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	client := sqstestenv.NewClient(os.Getenv("CHILD_ENDPOINT"), nil)
	r, err := responder.New(client, func(o *responder.Options) {
		o.VisibilityTimeout = 2 * time.Second
		o.PollWaitTime = time.Second
		o.AllowReplyTo = []string{replyPrefix}
		o.SessionQueuePrefix = os.Getenv("CHILD_SESSION_PREFIX")
	})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("ready")
	pid := strconv.Itoa(os.Getpid())
	err = r.Serve(ctx, os.Getenv("CHILD_QUEUE"), responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
		fmt.Println("start", req.ID)
		for {
			m, err := req.Recv(ctx)
			if errors.Is(err, io.EOF) {
				return &responder.Reply{Body: "bye from " + pid}, nil
			}
			if err != nil {
				fmt.Printf("end %s cause=%v: %v\n", req.ID, context.Cause(ctx), err)
				return nil, err
			}
			if err := req.Send(ctx, &responder.Reply{Body: strings.ToUpper(aws.ToString(m.Body)) + " " + pid}); err != nil {
				return nil, err
			}
		}
	}))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// childSessionCaller opens a session on CHILD_QUEUE under a CHILD_TIMEOUT
// deadline, streams one message, reads the handler's reply, prints
// "opened <request id> <deadline, Unix ns>" and waits to be killed.
func childSessionCaller() int {
	client := sqstestenv.NewClient(os.Getenv("CHILD_ENDPOINT"), nil)
	r, err := requester.New(client, func(o *requester.Options) {
		o.Prefix = os.Getenv("CHILD_PREFIX")
		o.DisableSweeping = true
	})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	timeout, err := time.ParseDuration(os.Getenv("CHILD_TIMEOUT"))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("ready")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	s, err := r.OpenSession(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(os.Getenv("CHILD_QUEUE")), MessageBody: aws.String("caller")})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if err := s.Send(ctx, &requester.Message{Body: "hello"}); err != nil {
		fmt.Println("error", err)
		return 1
	}
	if _, err := s.Next(ctx); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("opened", s.RequestID(), deadline.UnixNano())
	<-ctx.Done() // killed before
	fmt.Println("error: not killed before the deadline")
	return 1
}

// deleteQueuesAfter deletes, when the test ends, the queues under prefix
// that killed processes left (a host queue is deleted by its owner's
// Close, which a SIGKILL skips; the reaper would take it later).
func (e *env) deleteQueuesAfter(t *testing.T, prefix string) {
	t.Cleanup(func() {
		out, err := e.raw.ListQueues(context.Background(), &sqs.ListQueuesInput{QueueNamePrefix: aws.String(prefix)})
		if err != nil {
			t.Logf("listing the queues left: %v", err)
			return
		}
		for _, u := range out.QueueUrls {
			_, _ = e.raw.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
}

// queueEmpty waits up to within for q to hold no message, visible or in
// flight, and fails t if it still holds some.
func (e *env) queueEmpty(t *testing.T, q string, within time.Duration) {
	t.Helper()
	names := []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}
	var attrs map[string]string
	if !testtime.Until(within, func() bool {
		out, err := e.raw.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q), AttributeNames: names})
		if err != nil {
			t.Fatal(err)
		}
		attrs = out.Attributes
		return attrs[string(names[0])] == "0" && attrs[string(names[1])] == "0"
	}) {
		t.Fatalf("queue %s still holds messages after %v: %v", q, within, attrs)
	}
}

// A responder process killed mid-session: its caller's session ends with
// ErrSessionAborted as soon as another responder takes the request again
// (that one's run is cancelled at once and the request deleted), or with
// ErrTimeout at its deadline when none does. Nothing waits past that.
func TestSessionResponderProcessKilled(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		if b.Endpoint == "" {
			t.Skip("needs an endpoint child processes can reach")
		}
		for _, again := range []bool{true, false} {
			name := "taken-again"
			if !again {
				name = "alone"
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, b)
				q := e.queue(t, "session", nil)
				sessionPrefix := e.prefix + "s_"
				e.deleteQueuesAfter(t, sessionPrefix)
				childEnv := []string{"CHILD_ENDPOINT=" + b.Endpoint, "CHILD_QUEUE=" + q, "CHILD_SESSION_PREFIX=" + sessionPrefix}
				first := startChildAs(t, "session-responder", childEnv...)
				r := e.requester(t)
				timeout := 30 * time.Second
				if !again {
					timeout = 6 * time.Second
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				deadline, _ := ctx.Deadline()
				s, err := r.OpenSession(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("crash")})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Send(ctx, &requester.Message{Body: "a"}); err != nil {
					t.Fatal(err)
				}
				if m, err := s.Next(ctx); err != nil || !strings.HasPrefix(aws.ToString(m.Body), "A ") {
					t.Fatalf("first reply: %v, %v", m, err)
				}
				first.expect(t, "start "+s.RequestID(), 5*time.Second)
				first.kill()
				killed := time.Now()
				var second *child
				if again {
					second = startChildAs(t, "session-responder", childEnv...)
				}
				// Sends still go (to a queue nobody reads) until the
				// session ends.
				_ = s.Send(ctx, &requester.Message{Body: "b"})
				_, err = s.Next(context.Background())
				t.Logf("the session ended %v after the kill: %v", time.Since(killed), err)
				if again {
					if !errors.Is(err, requester.ErrSessionAborted) {
						t.Fatalf("Next after the responder died and another took the request: %v, want ErrSessionAborted", err)
					}
					if ctx.Err() != nil {
						t.Fatal("the abort came only at the deadline")
					}
					second.expect(t, "start "+s.RequestID(), 5*time.Second)
					if l := second.expect(t, "end "+s.RequestID(), 5*time.Second); !strings.Contains(l, "cause="+responder.ErrCallerGone.Error()) {
						t.Errorf("the second responder's run ended with %q, want the caller gone", l)
					}
					if err := s.Send(ctx, &requester.Message{Body: "c"}); !errors.Is(err, requester.ErrSessionAborted) {
						t.Errorf("Send after the abort: %v, want ErrSessionAborted", err)
					}
				} else {
					if !errors.Is(err, requester.ErrTimeout) {
						t.Fatalf("Next after the responder died: %v, want ErrTimeout", err)
					}
					if late := time.Since(deadline); late > time.Second {
						t.Errorf("the session ended %v after its deadline", late)
					}
				}
				// The request is finished: deleted by the second responder
				// (or, alone, expired when it reappears to nobody: left).
				if again {
					e.queueEmpty(t, q, 5*time.Second)
				}
			})
		}
	})
}

// A caller process killed mid-session: the handler's context ends by the
// caller's deadline, the request is dropped as cancelled and deleted (not
// dead-lettered, not run again), and the responder goes on serving new
// sessions and shuts down promptly, leaving no goroutine behind.
func TestSessionCallerProcessKilled(t *testing.T) {
	// Not parallel: its leak check counts every goroutine of the process.
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		if b.Endpoint == "" {
			t.Skip("needs an endpoint child processes can reach")
		}
		e := newEnv(t, b)
		dlq := e.queue(t, "dlq", nil)
		arn, err := e.raw.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []types.QueueAttributeName{"QueueArn"}})
		if err != nil {
			t.Fatal(err)
		}
		q := e.queue(t, "session", map[string]string{
			"RedrivePolicy": `{"maxReceiveCount":"2","deadLetterTargetArn":"` + arn.Attributes["QueueArn"] + `"}`,
		})
		callerPrefix := e.prefix + "c_"
		e.deleteQueuesAfter(t, callerPrefix)
		type end struct {
			at    time.Time
			cause error
		}
		started := make(chan string, 10)
		ended := make(chan end, 10)
		var rec observetest.Recorder
		resp := serve(t, e.raw, q, func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			started <- req.ID
			for {
				m, err := req.Recv(ctx)
				if errors.Is(err, io.EOF) {
					return &responder.Reply{Body: "bye"}, nil
				}
				if err != nil {
					ended <- end{time.Now(), context.Cause(ctx)}
					return nil, err
				}
				if err := req.Send(ctx, &responder.Reply{Body: strings.ToUpper(aws.ToString(m.Body))}); err != nil {
					ended <- end{time.Now(), context.Cause(ctx)}
					return nil, err
				}
			}
		}, func(o *responder.Options) {
			o.SessionQueuePrefix = e.prefix + "s_"
			o.Observer = &rec
		})
		caller := startChildAs(t, "session-caller", "CHILD_ENDPOINT="+b.Endpoint, "CHILD_QUEUE="+q, "CHILD_PREFIX="+callerPrefix, "CHILD_TIMEOUT=5s")
		f := strings.Fields(caller.expect(t, "opened ", 10*time.Second))
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		deadline := time.Unix(0, ns)
		caller.kill()
		if id := <-started; id != f[1] {
			t.Fatalf("the handler ran request %s, want %s", id, f[1])
		}
		// The responder allows the callers' clocks to be ahead of its own
		// by wire.DeadlineClockSkew (1 s).
		select {
		case en := <-ended:
			t.Logf("the handler's context ended %v after the caller's deadline (cause %v)", en.at.Sub(deadline), en.cause)
			if en.at.After(deadline.Add(1500 * time.Millisecond)) {
				t.Errorf("the handler's context ended %v after the dead caller's deadline, want at most the 1 s of skew allowed", en.at.Sub(deadline))
			}
		case <-time.After(time.Until(deadline) + 5*time.Second):
			t.Fatal("the handler's context did not end by the dead caller's deadline")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if !rec.Wait(ctx, observe.Dropped, "cancelled", 1) {
			t.Fatalf("no Dropped, cancelled event: %v", rec.Events())
		}
		// Deleted, not left to be received again and dead-lettered: a
		// request left undeleted counts as not visible. Within the few
		// seconds a batched delete may wait for company.
		e.queueEmpty(t, q, 5*time.Second)
		e.queueEmpty(t, dlq, time.Second)
		select {
		case id := <-started:
			t.Fatalf("request %s was run again", id)
		default:
		}
		if st := resp.Stats(); st.Received != 1 || st.Failed != 0 {
			t.Errorf("responder stats %+v: want one request received, none failed", st)
		}

		// The responder serves a new session.
		r := e.requester(t)
		s, err := r.OpenSession(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("next")})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(ctx, &requester.Message{Body: "again"}); err != nil {
			t.Fatal(err)
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for m, err := range s.All(ctx) {
			if err != nil {
				t.Fatalf("new session after %v: %v", got, err)
			}
			got = append(got, aws.ToString(m.Body))
		}
		if strings.Join(got, ",") != "AGAIN,bye" {
			t.Fatalf("new session's replies %q", got)
		}
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		start := time.Now()
		if err := resp.Shutdown(sctx); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("Shutdown took %v with no session running", took)
		}
		leakcheck.Check(t)
	})
}
