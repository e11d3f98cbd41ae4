package reap_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/reap"
)

// TestSweepSurvivesFaults injects failures per queue: the sweep records
// them, retries throttled calls with backoff, treats vanished queues as
// fine, and handles every other queue.
func TestSweepSurvivesFaults(t *testing.T) {
	t.Parallel()
	m := newMemSQS()
	const p = "pfx_"
	stale := javaTags(60, time.Now().Add(-time.Hour))
	q := make([]string, 5)
	for i := range q {
		q[i] = m.add(hostName(p, i), stale, 1)
	}
	internal := &smithy.GenericAPIError{Code: "InternalError", Message: "boom", Fault: smithy.FaultServer}
	throttle := &types.RequestThrottled{Message: new(string)}
	var mu sync.Mutex
	deleteCalls := map[string]int{}
	m.fault = func(op, u string) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case op == "ListQueueTags" && u == q[0]:
			return internal
		case op == "ListQueueTags" && u == q[1]:
			return &types.QueueDoesNotExist{}
		case op == "DeleteQueue" && u == q[2]:
			deleteCalls[u]++
			if deleteCalls[u] <= 2 {
				return throttle
			}
		case op == "DeleteQueue" && u == q[3]:
			deleteCalls[u]++
			return throttle
		}
		return nil
	}
	s, err := reap.NewSweeper(m, func(o *reap.Config) { o.Prefix = p })
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Deleted) != 2 || m.has(q[2]) || m.has(q[4]) {
		t.Errorf("deleted %v, want q2 (after 2 throttles) and q4", rep.Deleted)
	}
	if d := rep.Outcomes; d.Vanished != 1 || rep.Kept() != 0 {
		t.Errorf("vanished %d, kept %d; want 1, 0", d.Vanished, rep.Kept())
	}
	if len(rep.Errors) != 2 {
		t.Fatalf("errors %v, want 2", rep.Errors)
	}
	var apiErr smithy.APIError
	for i, e := range rep.Errors {
		named := strings.Contains(e.Error(), q[0]) || strings.Contains(e.Error(), q[3])
		if !named || !errors.As(e, &apiErr) {
			t.Errorf("error %d %v: want the queue named and the API error wrapped", i, e)
		}
	}
	if deleteCalls[q[3]] != 4 {
		t.Errorf("%d DeleteQueue attempts on a throttled queue, want 4 (3 retries)", deleteCalls[q[3]])
	}

	// A failed listing is the sweep's own error.
	m.fault = func(op, _ string) error {
		if op == "ListQueues" {
			return internal
		}
		return nil
	}
	if _, err := s.Sweep(context.Background()); !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InternalError" {
		t.Errorf("Sweep with ListQueues failing = %v", err)
	}
}

// TestSweepPagesOnMemory checks pagination against the in-memory fake with
// a page size the fake enforces, complementing TestSweepPagesBeyond1000. It
// runs in a synctest bubble, where the sweep's pace of 10 tag reads a
// second costs no real time.
func TestSweepPagesOnMemory(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testSweepPagesOnMemory)
}

func testSweepPagesOnMemory(t *testing.T) {
	m := newMemSQS()
	const p = "pfx_"
	for i := range 2500 {
		// Live for an hour: the sweep paces its 2,500 tag reads over 250 s.
		m.add(hostName(p, i), javaTags(3600, time.Now()), 0)
	}
	s, err := reap.NewSweeper(m, func(o *reap.Config) { o.Prefix = p })
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Listed != 2500 || rep.Kept() != 2500 || m.calls["ListQueues"] != 3 {
		t.Errorf("listed %d, kept %d, ListQueues %d; want 2500, 2500, 3", rep.Listed, rep.Kept(), m.calls["ListQueues"])
	}
}
