package callback

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
)

func TestRunRecoversAndLogs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	if Run(log, "the hook", func() { panic("boom") }) != true {
		t.Fatal("a panic was not reported")
	}
	if !strings.Contains(buf.String(), "the hook panicked") || !strings.Contains(buf.String(), "boom") {
		t.Fatalf("log %q does not name the hook and the panic", buf.String())
	}
	ran := false
	if Run(nil, "quiet", func() { ran = true }) || !ran {
		t.Fatal("a normal call was reported as a panic, or did not run")
	}
	if !Run(nil, "nil logger", func() { panic(1) }) {
		t.Fatal("a panic with a nil logger was not reported")
	}
}

func TestObserveIsSafe(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	Observe(context.Background(), log, nil, observe.Event{Kind: observe.Send})(nil, nil) // nil observer: a no-op done
	var order []string
	o := observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
		order = append(order, "observe")
		return func(*types.Message, error) { order = append(order, "done"); panic("in done") }
	})
	Observe(context.Background(), log, o, observe.Event{Kind: observe.Reply})(nil, nil)
	if strings.Join(order, ",") != "observe,done" || !strings.Contains(buf.String(), "observer's done (reply) panicked") {
		t.Fatalf("calls %v, log %q", order, buf.String())
	}
	buf.Reset()
	bad := observe.Func(func(context.Context, observe.Event) func(*types.Message, error) { panic("in observe") })
	Observe(context.Background(), log, bad, observe.Event{Kind: observe.Dropped})(nil, nil)
	if !strings.Contains(buf.String(), "observer (dropped) panicked") {
		t.Fatalf("log %q does not report the observer's panic", buf.String())
	}
}
