package responder

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// syncBuffer is a bytes.Buffer a logger may write from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRequestsPastTheirDeadlineAreDeletedUnhandled sends requests whose
// callers gave up long ago, have time left, carry no deadline (a Java
// requester's) or a malformed one. Only the first kind is deleted without
// running the handler, counted and logged once; the handler of a request
// with time left runs under its caller's deadline, less its reply's
// travel, never later.
func TestRequestsPastTheirDeadlineAreDeletedUnhandled(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		e := newEnv(t, b)
		q := e.queue("req", nil)
		replies := e.queue("rep", nil)
		left := time.Now().Add(time.Minute).Truncate(time.Millisecond)
		send := func(body, deadline string) {
			t.Helper()
			attrs := map[string]types.MessageAttributeValue{
				sqsapi.ResponseQueueURLAttribute: wire.StringAttribute(replies),
				sqsapi.RequestIDAttribute:        wire.StringAttribute(body),
			}
			if deadline != "" {
				attrs[sqsapi.DeadlineAttribute] = wire.StringAttribute(deadline)
			}
			if _, err := e.client.SendMessage(context.Background(), &sqs.SendMessageInput{
				QueueUrl: &q, MessageBody: aws.String(body), MessageAttributes: attrs,
			}); err != nil {
				t.Fatal(err)
			}
		}
		ms := func(at time.Time) string { return strconv.FormatInt(at.UnixMilli(), 10) }
		send("gone", ms(time.Now().Add(-wire.DeadlineClockSkew-time.Second)))
		send("left", ms(left))
		send("java", "")
		send("odd", "tomorrow")

		var mu sync.Mutex
		ran := map[string]time.Time{} // body: the handler context's deadline
		var logs syncBuffer
		r := newResponder(t, e.client, func(o *Options) {
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			o.AllowReplyTo = []string{"tq-"} // the test's plain reply queue
		})
		serve(t, r, q, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			d, _ := ctx.Deadline()
			mu.Lock()
			ran[req.Body()] = d
			mu.Unlock()
			return &Reply{Body: "re:" + req.Body()}, nil
		}))
		got := e.replies(replies, 3, 20*time.Second)
		if len(got) != 3 {
			t.Fatalf("%d replies, want 3", len(got))
		}
		// The expired request is deleted once the others were handled.
		testtime.Until(10*time.Second, func() bool { return r.stats.Deleted.Load() >= 4 })
		s := r.Stats()
		if s.Dropped != 1 || r.stats.Deleted.Load() != 4 || s.Handled != 3 {
			t.Errorf("stats: Dropped %d, Deleted %d, Handled %d; want 1, 4, 3", s.Dropped, r.stats.Deleted.Load(), s.Handled)
		}
		mu.Lock()
		defer mu.Unlock()
		if _, ok := ran["gone"]; ok {
			t.Error("the handler ran for a request whose caller had given up")
		}
		if d := ran["left"]; d.IsZero() || d.After(left) || left.Sub(d) > time.Second {
			t.Errorf("handler deadline %v, want the caller's %v less a reply's travel", d, left)
		}
		for _, body := range []string{"java", "odd"} {
			if d, ok := ran[body]; !ok || !d.IsZero() {
				t.Errorf("request %q: ran %v with deadline %v; want it run with none", body, ok, d)
			}
		}
		if n := strings.Count(logs.String(), "caller's deadline had passed"); n != 1 {
			t.Errorf("the expired request was logged %d times, want once:\n%s", n, logs.String())
		}
		if !strings.Contains(logs.String(), "malformed request deadline") {
			t.Errorf("the malformed deadline was not logged:\n%s", logs.String())
		}
		if v, f := e.depth(q); v != "0" || f != "0" {
			t.Errorf("request queue holds %s visible, %s in flight; want none", v, f)
		}
	})
}

// TestHandlerDeadlineLeavesTimeForTheReply checks the handler's deadline
// against its caller's: earlier by two calls' latency, by at most half
// the time left, and never later, whatever the clock skew allowed.
func TestHandlerDeadlineLeavesTimeForTheReply(t *testing.T) {
	now := time.Date(2026, 11, 27, 13, 13, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		left   time.Duration // until the caller's deadline
		lat    time.Duration
		reserv time.Duration // the caller's deadline less the handler's
	}{
		{"no call measured yet", 10 * time.Second, 0, 0},
		{"two calls' travel", 10 * time.Second, 20 * time.Millisecond, 40 * time.Millisecond},
		{"at most half the time left", 30 * time.Millisecond, 20 * time.Millisecond, 15 * time.Millisecond},
		{"caller's deadline passed, within the skew", -300 * time.Millisecond, 20 * time.Millisecond, 0},
	} {
		caller := now.Add(c.left)
		if got := handlerDeadline(caller, now, c.lat); !got.Equal(caller.Add(-c.reserv)) {
			t.Errorf("%s: handler deadline %v before the caller's, want %v", c.name, caller.Sub(got), c.reserv)
		}
	}
}
