package observetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
	"github.com/tempqueues/tempqueues/observe"
)

func TestRecorder(t *testing.T) {
	var r Recorder
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		r.Observe(ctx, observe.Event{Kind: observe.Dropped, Reason: "expired"})
		r.Observe(ctx, observe.Event{Kind: observe.Dropped, Reason: "refused"})
		r.Observe(ctx, observe.Event{Kind: observe.Send, RequestID: "r1"})(nil, errors.New("timeout"))
	}()
	if !r.Wait(ctx, observe.Dropped, "", 2) {
		t.Fatal("Wait gave up before two drops were recorded")
	}
	if !r.Wait(ctx, observe.Send, "", 1) {
		t.Fatal("Wait gave up before the send was recorded")
	}
	if r.Count(observe.Dropped, "expired") != 1 || r.Count(observe.Dropped, "") != 2 || r.Count(observe.Handled, "") != 0 {
		t.Fatalf("counts wrong: %+v", r.Events())
	}
	short, stop := context.WithTimeout(ctx, 10*time.Millisecond)
	defer stop()
	if r.Wait(short, observe.Handled, "", 1) {
		t.Fatal("Wait reported an event that never happened")
	}
	testtime.Until(time.Second, func() bool { return len(r.Outcomes()) > 0 })
	if o := r.Outcomes(); len(o) != 1 || o[0].Event.RequestID != "r1" || o[0].Err == nil {
		t.Fatalf("outcomes %+v", o)
	}
}
