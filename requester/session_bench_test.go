package requester_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/rpcbench"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
)

// sessionLen is the number of messages a benchmarked session carries each
// way: the caller sends as many as the handler echoes.
const sessionLen = 100

// BenchmarkSession measures bidirectional sessions (OpenSession against an
// echo handler) at 1, 8 and 64 concurrent sessions on the in-process
// sqstest server, in two modes.
//
// stream: the caller sends 100 messages while it reads, then CloseSend;
// the handler answers each with an echo, then a final reply. One op is
// one session. It reports messages per second each way, the p50 and p99
// one-way latency of a message up (from the caller's Send to the handler's
// Recv) and down (from the handler's Send to the caller's Next), both
// measured from the call, so that waiting for credit counts, and the
// first message's wait for the session to open too; API calls per message
// (both sides, both ways: 200 messages per session; everything counted,
// the session's opening, credit messages, end marks and empty receives
// included); and the process's CPU time per message.
//
// pingpong: on sessions opened beforehand (each by a first exchange, which
// waits for the session's queue), the callers send one message and wait
// for its echo before sending the next; one op is one such round trip.
// It reports the p50 and p99 of the round trips, then, in the same run,
// makes as many unary calls (SendMessageAndGetResponse, to the same
// responder, from as many goroutines as there are sessions), and reports
// their p50 and the ratio of the two p50s, with the API calls and CPU time
// of each (the sessions' opening and closing not counted; ns/op covers
// both phases).
//
// b.N must reach the number of sessions for them all to run at once: a
// -benchtime of a few seconds does.
//
//	go test -run '^$' -bench 'BenchmarkSession$' -benchtime 5s ./requester
func BenchmarkSession(b *testing.B) { benchmarkSession(b, 0) }

// BenchmarkSessionSQSLatency is BenchmarkSession with 10 ms added to every
// call, as BenchmarkStreamSQSLatency.
//
//	go test -run '^$' -bench BenchmarkSessionSQSLatency -benchtime 5s ./requester
func BenchmarkSessionSQSLatency(b *testing.B) { benchmarkSession(b, 10*time.Millisecond) }

func benchmarkSession(b *testing.B, latency time.Duration) {
	be := benchBackend(b, latency)
	for _, mode := range []string{"stream", "pingpong"} {
		for _, sessions := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/sessions=%d", mode, sessions), func(b *testing.B) {
				client, counter := be.Client(b)
				sb := &sessionBench{counter: counter, sessions: sessions}
				sb.queue, sb.r = benchService(b, client, responder.HandlerFunc(sb.echo))
				if mode == "stream" {
					sb.stream(b)
				} else {
					sb.pingPong(b)
				}
			})
		}
	}
}

// sessionBench is one run of BenchmarkSession.
type sessionBench struct {
	r        *requester.Requester
	queue    string
	counter  *callcount.Counter
	sessions int
	// What the handlers measured: the latency of each message up, from
	// the caller's Send to Recv, and of each unary request, from the
	// caller's call to the handler.
	up, request rpcbench.Latencies
}

// echo answers each message of a session with a stamped echo, then
// returns the request's body. A unary request has no more messages: its
// body is a stamp, and it gets one back.
func (sb *sessionBench) echo(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
	for {
		m, err := req.Recv(ctx)
		if errors.Is(err, io.EOF) {
			if req.Body() == sessionBody {
				return &responder.Reply{Body: sessionBody}, nil
			}
			sb.request.Add(rpcbench.SinceStamp(req.Body()))
			return &responder.Reply{Body: rpcbench.Stamp()}, nil
		}
		if err != nil {
			return nil, err
		}
		sb.up.Add(rpcbench.SinceStamp(aws.ToString(m.Body)))
		if err := req.Send(ctx, &responder.Reply{Body: rpcbench.Stamp()}); err != nil {
			return nil, err
		}
	}
}

// sessionBody is the body of the requests that open sessions, and of
// their final replies.
const sessionBody = "session"

func (sb *sessionBench) open(ctx context.Context) (*requester.Session, error) {
	return sb.r.OpenSession(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(sb.queue), MessageBody: aws.String(sessionBody)})
}

// finish reads a session's final reply and its end.
func finish(ctx context.Context, s *requester.Session) error {
	m, err := s.Next(ctx)
	if err != nil {
		return fmt.Errorf("final reply: %w", err)
	}
	if got := aws.ToString(m.Body); got != sessionBody {
		return fmt.Errorf("final reply %q, want the request's body", got)
	}
	if _, err := s.Next(ctx); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after the final reply: %v, want io.EOF", err)
	}
	return nil
}

// streamSession runs one session of the stream mode, adding the latency
// of each echo to down.
func (sb *sessionBench) streamSession(ctx context.Context, down *rpcbench.Latencies) error {
	s, err := sb.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	sent := make(chan error, 1)
	go func() {
		for range sessionLen {
			if err := s.Send(ctx, &requester.Message{Body: rpcbench.Stamp()}); err != nil {
				sent <- err
				return
			}
		}
		sent <- s.CloseSend()
	}()
	got := make([]time.Duration, 0, sessionLen)
	for len(got) < sessionLen {
		m, err := s.Next(ctx)
		if err != nil {
			return fmt.Errorf("after %d echoes: %w", len(got), err)
		}
		got = append(got, rpcbench.SinceStamp(aws.ToString(m.Body)))
	}
	if err := <-sent; err != nil {
		return err
	}
	down.Add(got...)
	return finish(ctx, s)
}

func (sb *sessionBench) stream(b *testing.B) {
	var down rpcbench.Latencies
	if err := sb.streamSession(context.Background(), &down); err != nil { // warm up: both hosts, pollers
		b.Fatal(err)
	}
	down.Reset()
	sb.up.Reset()
	sb.counter.Reset()
	b.ResetTimer()
	cpu0 := rpcbench.ProcessCPU()
	rpcbench.RunOps(b, sb.sessions, func(ctx context.Context, _ int) error { return sb.streamSession(ctx, &down) })
	b.StopTimer()
	msgs := float64(2 * b.N * sessionLen)
	rpcbench.ReportTwoWay(b, cpu0, msgs)
	b.Logf("N=%d: calls per msg: %s", b.N, rpcbench.ReportCalls(b, sb.counter.Snapshot(), msgs, "msg"))
	sb.up.Report(b, "up")
	down.Report(b, "down")
}

// exchange sends one message on s and waits for its echo, adding the
// echo's latency to down, when not nil.
func exchange(ctx context.Context, s *requester.Session, down *rpcbench.Latencies) error {
	if err := s.Send(ctx, &requester.Message{Body: rpcbench.Stamp()}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	m, err := s.Next(ctx)
	if err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	if down != nil {
		down.Add(rpcbench.SinceStamp(aws.ToString(m.Body)))
	}
	return nil
}

func (sb *sessionBench) pingPong(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Open the sessions, each by a first exchange, which waits for the
	// responder to name the session's queue.
	ss := make([]*requester.Session, sb.sessions)
	errs := make(chan error, sb.sessions)
	for i := range ss {
		go func() {
			s, err := sb.open(ctx)
			if err == nil {
				ss[i] = s
				err = exchange(ctx, s, nil)
			}
			errs <- err
		}()
	}
	for range ss {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for _, s := range ss {
			s.Close()
		}
	}()
	var rts, down, unary, reply rpcbench.Latencies
	sb.up.Reset()
	sb.counter.Reset()
	b.ResetTimer()
	cpu0 := rpcbench.ProcessCPU()
	rpcbench.RunOps(b, sb.sessions, func(ctx context.Context, w int) error {
		start := time.Now()
		if err := exchange(ctx, ss[w], &down); err != nil {
			return err
		}
		rts.Add(time.Since(start))
		return nil
	})
	cpu1 := rpcbench.ProcessCPU()
	calls := sb.counter.Snapshot()
	b.StopTimer()
	for _, s := range ss {
		if err := s.CloseSend(); err != nil {
			b.Fatal(err)
		}
		if err := finish(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	// As many unary calls from as many goroutines.
	sb.counter.Reset()
	sb.request.Reset()
	cpu2 := rpcbench.ProcessCPU()
	b.StartTimer()
	rpcbench.RunOps(b, sb.sessions, func(ctx context.Context, _ int) error {
		start := time.Now()
		m, err := sb.r.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(sb.queue), MessageBody: aws.String(rpcbench.Stamp())})
		if err != nil {
			return err
		}
		unary.Add(time.Since(start))
		reply.Add(rpcbench.SinceStamp(aws.ToString(m.Body)))
		return nil
	})
	b.StopTimer()
	cpu3 := rpcbench.ProcessCPU()
	if cpu1 > cpu0 {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-us/rt")
		b.ReportMetric(float64((cpu3-cpu2).Microseconds())/float64(b.N), "cpu-us/unary")
	}
	byRT := rpcbench.ReportCalls(b, calls, float64(b.N), "rt")
	byUnary := rpcbench.ReportCalls(b, sb.counter.Snapshot(), float64(b.N), "unary")
	rts.Report(b, "rt")
	unary.Report(b, "unary")
	if rts.Len() == 0 || unary.Len() == 0 {
		return // failed
	}
	b.ReportMetric(rts.Percentile(50)/unary.Percentile(50), "rt/unary-p50")
	// One line per run: the testing package keeps 10 lines of a
	// benchmark's log, over all its runs.
	b.Logf("N=%d: p50 one way: session up %.1f ms, down %.1f ms; unary request %.1f ms, reply %.1f ms; calls per rt: %s; per unary: %s",
		b.N, sb.up.Percentile(50), down.Percentile(50), sb.request.Percentile(50), reply.Percentile(50), byRT, byUnary)
}
