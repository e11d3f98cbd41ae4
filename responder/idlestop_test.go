package responder

import (
	"context"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
)

// TestIdleStop: an idle Serve with default options stops promptly, with a
// nil error, both after Shutdown and after its context is cancelled. It
// runs in a synctest bubble: the time it takes is the bubble's, at most
// the half second a parked long poll is given, not the 20 s poll.
func TestIdleStop(t *testing.T) {
	inBubble(t, func(t *testing.T, be *sqstestenv.Backend) {
		e := newEnv(t, be)
		q := e.queue("idle", nil)
		for _, how := range []string{"Shutdown", "cancel"} {
			r, err := New(e.client)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- r.Serve(ctx, q, echo) }()
			testtime.Advance(time.Second) // the long poll is parked
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			begun := time.Now()
			var serr error
			if how == "Shutdown" {
				serr = r.Shutdown(sctx)
			} else {
				cancel()
			}
			err = <-errc
			took := time.Since(begun)
			if how == "cancel" {
				serr = r.Shutdown(sctx)
			}
			scancel()
			cancel()
			t.Logf("%s: idle Serve stopped in %v", how, took.Round(time.Millisecond))
			if err != nil || serr != nil {
				t.Errorf("%s: Serve = %v, Shutdown = %v; want nil, nil", how, err, serr)
			}
			if took > time.Second {
				t.Errorf("%s: idle Serve took %v to stop", how, took)
			}
		}
	})
}
