package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
)

// visits records the set-ups and closes of fake contenders, and whether a
// contender was set up while another was still open.
type visits struct {
	mu      sync.Mutex
	events  []string
	open    int
	overlap bool
}

func (v *visits) add(event string, delta int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.events = append(v.events, event)
	if delta > 0 && v.open > 0 {
		v.overlap = true
	}
	v.open += delta
}

// fake is a contender that makes no API call: each call spins for burn
// and sleeps for nap, and with spinner set, setup starts a goroutine that
// spins until close, like a busy poller left running.
type fake struct {
	n       string
	v       *visits
	burn    time.Duration
	nap     time.Duration
	spinner bool
	stop    atomic.Bool
	wg      sync.WaitGroup
}

func (f *fake) name() string { return f.n }

func (f *fake) setup(context.Context) error {
	f.v.add("setup "+f.n, 1)
	if f.spinner {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for !f.stop.Load() {
			}
		}()
	}
	return nil
}

func (f *fake) call(ctx context.Context, _ int) (time.Duration, error) {
	start := time.Now()
	for time.Since(start) < f.burn {
	}
	if f.nap > 0 {
		if err := sleep(ctx, f.nap); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func (f *fake) close(context.Context) error {
	f.stop.Store(true)
	f.wg.Wait()
	f.v.add("close "+f.n, -1)
	return nil
}

// TestRunMeasuresCPUPerContender runs a CPU-hungry contender, with a
// goroutine that spins for as long as it is open, before and after an
// idle one: the idle one's CPU figure must not carry the other's spinner,
// which would add hundreds of microseconds to each of its RPCs.
func TestRunMeasuresCPUPerContender(t *testing.T) {
	if _, ok := processCPU(); !ok {
		t.Skip("no process CPU time on this system")
	}
	v := new(visits)
	cfg := Config{
		NewClient:   func(*callcount.Counter) *sqs.Client { return sqs.New(sqs.Options{}) },
		Contenders:  []string{TempQueues, Floor},
		Concurrency: []int{1, 2},
		Rounds:      2,
		Duration:    200 * time.Millisecond,
	}
	rep, err := run(context.Background(), cfg, func(name string, _ *env, _ *sqs.Client) contender {
		if name == TempQueues {
			return &fake{n: name, v: v, burn: 200 * time.Microsecond, spinner: true}
		}
		return &fake{n: name, v: v, nap: time.Millisecond}
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each round visits both, in rotating order, one closed before the
	// next is set up.
	want := []string{"setup tempqueues", "close tempqueues", "setup floor", "close floor",
		"setup floor", "close floor", "setup tempqueues", "close tempqueues"}
	if !slices.Equal(v.events, want) || v.overlap {
		t.Errorf("visits %q (overlap %v), want %q", v.events, v.overlap, want)
	}
	if rep.CPUIncludesServer {
		t.Error("CPUIncludesServer without Config.ServerInProcess")
	}
	for _, conc := range cfg.Concurrency {
		busy, idle := rep.Find(TempQueues, conc), rep.Find(Floor, conc)
		if busy == nil || idle == nil || busy.RPCs == 0 || idle.RPCs == 0 {
			t.Fatalf("results %+v", rep.Results)
		}
		t.Logf("%d callers: busy %.0f µs CPU/RPC, idle %.0f", conc, busy.CPUMicrosPerRPC, idle.CPUMicrosPerRPC)
		// The busy one spins 200 µs per call at least.
		if busy.CPUMicrosPerRPC < 150 {
			t.Errorf("%d callers: busy contender %.0f µs CPU per RPC, want at least 150", conc, busy.CPUMicrosPerRPC)
		}
		// The idle one sleeps 1 ms per call; a spinner left running would
		// bill it about one core: 1000 µs per RPC at one caller, 500 at two.
		if idle.CPUMicrosPerRPC <= 0 || idle.CPUMicrosPerRPC > 250 {
			t.Errorf("%d callers: idle contender %.0f µs CPU per RPC, want above 0 and at most 250", conc, idle.CPUMicrosPerRPC)
		}
	}
	if s := fmt.Sprint(rep.Find(Floor, 1).CallsByOp); s != "map[]" {
		t.Errorf("fake contenders made API calls: %s", s)
	}
}

// flaky is a fake contender whose set-up fails while fails is positive.
type flaky struct {
	fake
	fails *int
}

func (f *flaky) setup(ctx context.Context) error {
	if *f.fails > 0 {
		*f.fails--
		f.v.add("failed setup "+f.n, 0)
		return errors.New("no response")
	}
	return f.fake.setup(ctx)
}

// TestRunSetsUpOnceMore: a set-up that fails once is noted and tried once
// more; one that fails twice ends the run.
func TestRunSetsUpOnceMore(t *testing.T) {
	for _, fails := range []int{1, 2} {
		v := new(visits)
		left := fails
		cfg := Config{
			NewClient:   func(*callcount.Counter) *sqs.Client { return sqs.New(sqs.Options{}) },
			Contenders:  []string{Floor},
			Concurrency: []int{1},
			Rounds:      1,
			Duration:    20 * time.Millisecond,
		}
		rep, err := run(context.Background(), cfg, func(name string, _ *env, _ *sqs.Client) contender {
			return &flaky{fake: fake{n: name, v: v, nap: time.Millisecond}, fails: &left}
		})
		switch fails {
		case 1:
			if err != nil || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "floor, round 1: setting up: no response; set up once more") ||
				rep.Find(Floor, 1).RPCs == 0 {
				t.Fatalf("one failed set-up: %v, report %+v", err, rep)
			}
			var b bytes.Buffer
			if err := WriteTable(&b, rep); err != nil || !strings.Contains(b.String(), "\nnotes:\n\n- floor, round 1: setting up: no response; set up once more\n") {
				t.Errorf("table without the note (%v):\n%s", err, b.String())
			}
		case 2:
			if err == nil || !strings.Contains(err.Error(), "no response") {
				t.Errorf("two failed set-ups: %v, want the run to fail", err)
			}
		}
		// Every contender set up or tried is closed, the failed one too.
		want := []string{"failed setup floor", "close floor", "setup floor", "close floor"}
		if fails == 2 {
			want = []string{"failed setup floor", "close floor", "failed setup floor", "close floor"}
		}
		if !slices.Equal(v.events, want) {
			t.Errorf("%d failures: visits %q, want %q", fails, v.events, want)
		}
	}
}
