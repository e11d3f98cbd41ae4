package hostq

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestSetOpensOncePerKey(t *testing.T) {
	var s Set[int]
	var opens atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.Get(context.Background(), "k", func() (int, error) {
				opens.Add(1)
				<-release
				return 42, nil
			}, nil)
			if v != 42 || err != nil {
				t.Errorf("Get = %d, %v", v, err)
			}
		}()
	}
	close(release)
	wg.Wait()
	if opens.Load() != 1 {
		t.Fatalf("%d opens for one key, want 1", opens.Load())
	}
	if v, ok := s.Lookup("k"); !ok || v != 42 {
		t.Fatalf("Lookup = %d, %v", v, ok)
	}
}

func TestSetRetriesAFailedOpenAndUndoesAfterClose(t *testing.T) {
	var s Set[int]
	boom := errors.New("boom")
	if _, err := s.Get(context.Background(), "k", func() (int, error) { return 0, boom }, nil); err != boom {
		t.Fatalf("first Get = %v", err)
	}
	if v, err := s.Get(context.Background(), "k", func() (int, error) { return 7, nil }, nil); v != 7 || err != nil {
		t.Fatalf("Get after a failed open = %d, %v", v, err)
	}
	if got := s.Remove(func(v int) bool { return v == 7 }); len(got) != 1 {
		t.Fatalf("Remove = %v", got)
	}
	// A value whose open ends after Close is undone.
	opening, proceed := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	var undone atomic.Int32
	go func() {
		_, err := s.Get(context.Background(), "late", func() (int, error) {
			close(opening)
			<-proceed
			return 1, nil
		}, func(int) { undone.Add(1) })
		done <- err
	}()
	<-opening
	if vals := s.Close(); len(vals) != 0 {
		t.Fatalf("Close returned %v, want nothing opened", vals)
	}
	close(proceed)
	if err := <-done; !errors.Is(err, sqsapi.ErrClosed) || undone.Load() != 1 {
		t.Fatalf("open finished after Close: err %v, undone %d", err, undone.Load())
	}
	if _, err := s.Get(context.Background(), "k", func() (int, error) { return 1, nil }, nil); !errors.Is(err, sqsapi.ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
}
