// Package storetest checks that an implementation of responder.Store keeps
// the contract Serve relies on. Run it from a test of the implementation:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) responder.Store { return newStoreFor(t) })
//	}
//
// The checks run on the real clock: leases and TTLs of a few hundred
// milliseconds expire while the test sleeps, so a store must honour
// millisecond durations. newStore is called once per subtest; the stores it
// returns may share a backend as long as their keys do not collide (give
// each its own key prefix, or a fresh database). The subtests run in
// parallel.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/responder"
)

// Durations of the checks. long is a lease that must not expire during a
// check, even on a loaded machine; short is one that the check only waits
// out; brief is one that must still hold right after it was set and must
// have ended after pastBrief, with room for a slow machine either way.
const (
	long      = 10 * time.Second
	short     = 150 * time.Millisecond
	pastShort = 3 * short
	brief     = 800 * time.Millisecond
	pastBrief = brief + brief/2
)

// Run runs the conformance checks as subtests of t.
func Run(t *testing.T, newStore func(t *testing.T) responder.Store) {
	t.Helper()
	checks := []struct {
		name string
		fn   func(t *testing.T, s responder.Store)
	}{
		{"BeginAcquiresFreeKey", beginAcquiresFreeKey},
		{"LeaseExcludesOthers", leaseExcludesOthers},
		{"RenewByOwnerOnly", renewByOwnerOnly},
		{"RenewKeepsLeaseAlive", renewKeepsLeaseAlive},
		{"ReleaseByOwnerOnly", releaseByOwnerOnly},
		{"ExpiredLeaseIsTakenOver", expiredLeaseIsTakenOver},
		{"CompleteStoresReply", completeStoresReply},
		{"CompleteStoresNilReply", completeStoresNilReply},
		{"CompleteAfterLeaseLost", completeAfterLeaseLost},
		{"AnswerExpires", answerExpires},
		{"KeysAreIndependent", keysAreIndependent},
		{"OneWinnerUnderRace", oneWinnerUnderRace},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // the checks mostly sleep
			c.fn(t, newStore(t))
		})
	}
}

func begin(t *testing.T, s responder.Store, key, token string, lease time.Duration) responder.Entry {
	t.Helper()
	e, err := s.Begin(context.Background(), key, token, lease)
	if err != nil {
		t.Fatalf("Begin(%q, %q): %v", key, token, err)
	}
	return e
}

func wantStatus(t *testing.T, what string, e responder.Entry, want responder.Status) {
	t.Helper()
	if e.Status != want {
		t.Fatalf("%s: status %v, want %v", what, e.Status, want)
	}
}

func beginAcquiresFreeKey(t *testing.T, s responder.Store) {
	e := begin(t, s, "req-1", "a", long)
	wantStatus(t, "Begin on a new key", e, responder.Acquired)
	if e.Reply != nil {
		t.Fatalf("Acquired entry carries a reply: %+v", e.Reply)
	}
	// The owner asking again keeps its lease.
	wantStatus(t, "Begin again by the owner", begin(t, s, "req-1", "a", long), responder.Acquired)
}

func leaseExcludesOthers(t *testing.T, s responder.Store) {
	wantStatus(t, "first Begin", begin(t, s, "req-1", "a", long), responder.Acquired)
	for _, tok := range []string{"b", "c"} {
		e := begin(t, s, "req-1", tok, long)
		wantStatus(t, "Begin by "+tok+" while leased", e, responder.InProgress)
		if e.Reply != nil {
			t.Fatalf("InProgress entry carries a reply: %+v", e.Reply)
		}
	}
}

func renewByOwnerOnly(t *testing.T, s responder.Store) {
	ctx := context.Background()
	if err := s.Renew(ctx, "absent", "a", long); !errors.Is(err, responder.ErrLeaseLost) {
		t.Fatalf("Renew of an absent key = %v, want ErrLeaseLost", err)
	}
	begin(t, s, "req-1", "a", long)
	if err := s.Renew(ctx, "req-1", "b", long); !errors.Is(err, responder.ErrLeaseLost) {
		t.Fatalf("Renew by a non-owner = %v, want ErrLeaseLost", err)
	}
	if err := s.Renew(ctx, "req-1", "a", long); err != nil {
		t.Fatalf("Renew by the owner = %v", err)
	}
	// The non-owner's attempt took nothing away.
	wantStatus(t, "Begin after a non-owner's Renew", begin(t, s, "req-1", "b", long), responder.InProgress)
	if err := s.Complete(ctx, "req-1", "a", &responder.Reply{Body: "x"}, long); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(ctx, "req-1", "a", long); !errors.Is(err, responder.ErrLeaseLost) {
		t.Fatalf("Renew after Complete = %v, want ErrLeaseLost", err)
	}
}

func renewKeepsLeaseAlive(t *testing.T, s responder.Store) {
	ctx := context.Background()
	// Renewed twice, half a lease apart, the lease outlives the three waits
	// by half a lease: without the renewals it would have ended.
	begin(t, s, "req-1", "a", brief)
	for range 2 {
		time.Sleep(brief / 2)
		if err := s.Renew(ctx, "req-1", "a", brief); err != nil {
			t.Fatalf("Renew = %v", err)
		}
	}
	time.Sleep(brief / 2)
	wantStatus(t, "Begin after renewals, past the first lease", begin(t, s, "req-1", "b", long), responder.InProgress)
	// Renew sets a new lease length; it does not only add to the old one.
	if err := s.Renew(ctx, "req-1", "a", short); err != nil {
		t.Fatalf("Renew = %v", err)
	}
	time.Sleep(pastShort)
	wantStatus(t, "Begin after the renewed lease ended", begin(t, s, "req-1", "b", long), responder.Acquired)
}

func releaseByOwnerOnly(t *testing.T, s responder.Store) {
	ctx := context.Background()
	begin(t, s, "req-1", "a", long)
	if err := s.Release(ctx, "req-1", "b"); err != nil {
		t.Fatalf("Release by a non-owner = %v, want nil", err)
	}
	wantStatus(t, "Begin after a non-owner's Release", begin(t, s, "req-1", "c", long), responder.InProgress)
	if err := s.Release(ctx, "req-1", "a"); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if err := s.Renew(ctx, "req-1", "a", long); !errors.Is(err, responder.ErrLeaseLost) {
		t.Fatalf("Renew after Release = %v, want ErrLeaseLost", err)
	}
	wantStatus(t, "Begin after Release", begin(t, s, "req-1", "c", long), responder.Acquired)
	// Releasing twice, or a key never seen, is harmless.
	if err := s.Release(ctx, "req-1", "a"); err != nil {
		t.Fatalf("second Release = %v", err)
	}
	if err := s.Release(ctx, "absent", "a"); err != nil {
		t.Fatalf("Release of an absent key = %v", err)
	}
	wantStatus(t, "Begin after a stale Release", begin(t, s, "req-1", "d", long), responder.InProgress)
	// Release does not drop an answer.
	if err := s.Complete(ctx, "req-1", "c", &responder.Reply{Body: "kept"}, long); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "req-1", "c"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "Begin after Release of a completed key", begin(t, s, "req-1", "e", long), responder.Done)
}

func expiredLeaseIsTakenOver(t *testing.T, s responder.Store) {
	ctx := context.Background()
	// The owner "crashes": nothing renews its lease.
	begin(t, s, "req-1", "a", short)
	time.Sleep(pastShort)
	wantStatus(t, "Begin after the lease ended", begin(t, s, "req-1", "b", long), responder.Acquired)
	if err := s.Renew(ctx, "req-1", "a", long); !errors.Is(err, responder.ErrLeaseLost) {
		t.Fatalf("Renew by the old owner = %v, want ErrLeaseLost", err)
	}
	// The old owner's Release leaves the new lease alone.
	if err := s.Release(ctx, "req-1", "a"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "Begin after the old owner's Release", begin(t, s, "req-1", "c", long), responder.InProgress)
	if err := s.Renew(ctx, "req-1", "b", long); err != nil {
		t.Fatalf("Renew by the new owner = %v", err)
	}
}

// fullReply has attributes of every SQS data type, custom type labels and
// bytes that are not UTF-8.
func fullReply() *responder.Reply {
	return &responder.Reply{
		Body: "answer: ✓ \"quoted\" <tag> \\ \n\t end",
		Attributes: map[string]types.MessageAttributeValue{
			"s":      {DataType: aws.String("String"), StringValue: aws.String("text ünïcode 🚀")},
			"n":      {DataType: aws.String("Number"), StringValue: aws.String("-12.5e3")},
			"b":      {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 0xfe, 0xff, '\n', 0x80}},
			"custom": {DataType: aws.String("Binary.gzip"), BinaryValue: []byte{0x1f, 0x8b, 8, 0}},
			"label":  {DataType: aws.String("String.json"), StringValue: aws.String(`{"a":[1,2]}`)},
			"empty":  {DataType: aws.String("String"), StringValue: aws.String("")},
		},
	}
}

func sameReply(got, want *responder.Reply) error {
	if got == nil || want == nil {
		if got != want {
			return fmt.Errorf("got %+v, want %+v", got, want)
		}
		return nil
	}
	if got.Body != want.Body {
		return fmt.Errorf("body %q, want %q", got.Body, want.Body)
	}
	if len(got.Attributes) != len(want.Attributes) {
		return fmt.Errorf("%d attributes, want %d", len(got.Attributes), len(want.Attributes))
	}
	for name, w := range want.Attributes {
		g, ok := got.Attributes[name]
		if !ok {
			return fmt.Errorf("attribute %q missing", name)
		}
		if aws.ToString(g.DataType) != aws.ToString(w.DataType) ||
			(g.StringValue == nil) != (w.StringValue == nil) || aws.ToString(g.StringValue) != aws.ToString(w.StringValue) ||
			string(g.BinaryValue) != string(w.BinaryValue) ||
			!reflect.DeepEqual(g.StringListValues, w.StringListValues) || !reflect.DeepEqual(g.BinaryListValues, w.BinaryListValues) {
			return fmt.Errorf("attribute %q = %s, want %s", name, describe(g), describe(w))
		}
	}
	return nil
}

func describe(v types.MessageAttributeValue) string {
	s := "nil"
	if v.StringValue != nil {
		s = fmt.Sprintf("%q", *v.StringValue)
	}
	return fmt.Sprintf("{%s %s %x}", aws.ToString(v.DataType), s, v.BinaryValue)
}

func completeStoresReply(t *testing.T, s responder.Store) {
	ctx := context.Background()
	begin(t, s, "req-1", "a", long)
	reply := fullReply()
	if err := s.Complete(ctx, "req-1", "a", reply, long); err != nil {
		t.Fatalf("Complete = %v", err)
	}
	// The caller's reply is not shared with the store.
	reply.Body = "changed"
	reply.Attributes["late"] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("x")}

	for i, tok := range []string{"b", "a"} { // the old owner is answered too
		e := begin(t, s, "req-1", tok, long)
		wantStatus(t, "Begin after Complete", e, responder.Done)
		if err := sameReply(e.Reply, fullReply()); err != nil {
			t.Fatalf("stored reply: %v", err)
		}
		if i == 0 {
			// Nor is the reply a Begin returns.
			e.Reply.Attributes["late"] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("x")}
		}
	}
}

func completeStoresNilReply(t *testing.T, s responder.Store) {
	ctx := context.Background()
	begin(t, s, "req-1", "a", long)
	if err := s.Complete(ctx, "req-1", "a", nil, long); err != nil {
		t.Fatalf("Complete(nil) = %v", err)
	}
	e := begin(t, s, "req-1", "b", long)
	wantStatus(t, "Begin after Complete(nil)", e, responder.Done)
	if e.Reply != nil {
		t.Fatalf("nil reply came back as %+v", e.Reply)
	}
	// An empty body is a reply, not an absent one.
	begin(t, s, "req-2", "a", long)
	if err := s.Complete(ctx, "req-2", "a", &responder.Reply{}, long); err != nil {
		t.Fatal(err)
	}
	e = begin(t, s, "req-2", "b", long)
	wantStatus(t, "Begin after an empty reply", e, responder.Done)
	if e.Reply == nil || e.Reply.Body != "" || len(e.Reply.Attributes) != 0 {
		t.Fatalf("empty reply came back as %+v", e.Reply)
	}
}

// An answer is an answer: Complete stores it even when its caller's lease
// ended or passed to another owner.
func completeAfterLeaseLost(t *testing.T, s responder.Store) {
	ctx := context.Background()
	begin(t, s, "req-1", "a", short)
	time.Sleep(pastShort)
	if err := s.Complete(ctx, "req-1", "a", &responder.Reply{Body: "late"}, long); err != nil {
		t.Fatalf("Complete after the lease ended = %v", err)
	}
	e := begin(t, s, "req-1", "b", long)
	wantStatus(t, "Begin after a late Complete", e, responder.Done)
	if e.Reply == nil || e.Reply.Body != "late" {
		t.Fatalf("reply %+v", e.Reply)
	}

	begin(t, s, "req-2", "a", short)
	time.Sleep(pastShort)
	wantStatus(t, "take-over", begin(t, s, "req-2", "b", long), responder.Acquired)
	if err := s.Complete(ctx, "req-2", "a", &responder.Reply{Body: "from a"}, long); err != nil {
		t.Fatalf("Complete over another owner's lease = %v", err)
	}
	e = begin(t, s, "req-2", "c", long)
	wantStatus(t, "Begin after Complete over another lease", e, responder.Done)
	if e.Reply == nil || e.Reply.Body != "from a" {
		t.Fatalf("reply %+v", e.Reply)
	}
	if err := s.Renew(ctx, "req-2", "b", long); !errors.Is(err, responder.ErrLeaseLost) {
		t.Fatalf("Renew of a lease replaced by an answer = %v, want ErrLeaseLost", err)
	}
}

func answerExpires(t *testing.T, s responder.Store) {
	ctx := context.Background()
	begin(t, s, "req-1", "a", long)
	if err := s.Complete(ctx, "req-1", "a", &responder.Reply{Body: "brief"}, brief); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "Begin within the TTL", begin(t, s, "req-1", "b", long), responder.Done)
	time.Sleep(pastBrief)
	wantStatus(t, "Begin after the TTL", begin(t, s, "req-1", "c", long), responder.Acquired)
}

func keysAreIndependent(t *testing.T, s responder.Store) {
	ctx := context.Background()
	keys := []string{"a", "b", "a:b", "req/with spaces", "ключ", "{tag}x", "req-1", "req-1 "}
	for _, k := range keys {
		wantStatus(t, "Begin "+k, begin(t, s, k, "owner-"+k, long), responder.Acquired)
	}
	if err := s.Complete(ctx, "a", "owner-a", &responder.Reply{Body: "A"}, long); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "b", "owner-b"); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		e := begin(t, s, k, "other", long)
		want := responder.InProgress
		switch k {
		case "a":
			want = responder.Done
		case "b":
			want = responder.Acquired
		}
		wantStatus(t, "Begin "+k+" by another", e, want)
	}
}

func oneWinnerUnderRace(t *testing.T, s responder.Store) {
	const n = 16
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		acquired []string
		errs     []error
	)
	start := make(chan struct{})
	for i := range n {
		tok := fmt.Sprintf("t%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			e, err := s.Begin(context.Background(), "contended", tok, long)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case e.Status == responder.Acquired:
				acquired = append(acquired, tok)
			case e.Status != responder.InProgress:
				errs = append(errs, fmt.Errorf("%s: status %v", tok, e.Status))
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	if len(acquired) != 1 {
		t.Fatalf("%d of %d concurrent Begins acquired the lease (%v), want 1", len(acquired), n, acquired)
	}
}
