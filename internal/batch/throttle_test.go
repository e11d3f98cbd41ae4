package batch_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/batch"
	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
)

// throttler is a fake SQS whose batch calls are throttled: whole calls
// first (the SDK's error after its own attempts), then single entries (a
// BatchResultErrorEntry with a throttling code). A negative count throttles
// forever.
type throttler struct {
	mu       sync.Mutex
	calls    int
	whole    int   // whole calls left to throttle
	entries  int   // entries left to fail with entryErr
	wholeErr error // the whole-call error; default a throttle
	entryErr types.BatchResultErrorEntry
}

func throttleErr(op string) error {
	return fmt.Errorf("operation error SQS: %s, exceeded maximum number of attempts, 3, %w", op,
		&smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded", Fault: smithy.FaultClient})
}

// call accounts for one batch call of n entries and returns which entries
// fail, or the whole-call error.
func (f *throttler) call(op string, n int) ([]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.whole != 0 {
		f.whole--
		if f.wholeErr != nil {
			return nil, f.wholeErr
		}
		return nil, throttleErr(op)
	}
	failed := make([]bool, n)
	for i := range failed {
		if f.entries != 0 {
			f.entries--
			failed[i] = true
		}
	}
	return failed, nil
}

func (f *throttler) entryFailure(id *string) types.BatchResultErrorEntry {
	e := f.entryErr
	if e.Code == nil {
		e = types.BatchResultErrorEntry{Code: aws.String("RequestThrottled"), Message: aws.String("Request is throttled."), SenderFault: true}
	}
	e.Id = id
	return e
}

func (f *throttler) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *throttler) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	failed, err := f.call("SendMessageBatch", len(in.Entries))
	if err != nil {
		return nil, err
	}
	out := &sqs.SendMessageBatchOutput{}
	for i, e := range in.Entries {
		if failed[i] {
			out.Failed = append(out.Failed, f.entryFailure(e.Id))
			continue
		}
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m-" + strconv.Itoa(i))})
	}
	return out, nil
}

func (f *throttler) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	failed, err := f.call("DeleteMessageBatch", len(in.Entries))
	if err != nil {
		return nil, err
	}
	out := &sqs.DeleteMessageBatchOutput{}
	for i, e := range in.Entries {
		if failed[i] {
			out.Failed = append(out.Failed, f.entryFailure(e.Id))
			continue
		}
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *throttler) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	failed, err := f.call("ChangeMessageVisibilityBatch", len(in.Entries))
	if err != nil {
		return nil, err
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for i, e := range in.Entries {
		if failed[i] {
			out.Failed = append(out.Failed, f.entryFailure(e.Id))
			continue
		}
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func sendEntry(body string) types.SendMessageBatchRequestEntry {
	return types.SendMessageBatchRequestEntry{MessageBody: aws.String(body)}
}

// The failure: three throttles in a row (whole calls, each already
// the SDK's last attempt) failed a send whose caller had seconds left.
func TestThrottledSendIsRetriedWithinTheDeadline(t *testing.T) {
	for name, f := range map[string]*throttler{
		"whole calls":  {whole: 3},
		"batch entry":  {entries: 3},
		"both, mixed":  {whole: 2, entries: 2},
		"server fault": {whole: 2, wholeErr: &smithy.GenericAPIError{Code: "InternalError", Message: "500", Fault: smithy.FaultServer}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sends := batch.NewSends(f, 2, nil)
				batch.FastRetries(sends)
				defer sends.Close(context.Background())
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				out, err := sends.Do(ctx, "q", sendEntry("hello"))
				if err != nil || out.MessageId == nil {
					t.Fatalf("send under throttling: %v, %v", out.MessageId, err)
				}
				if n := f.Calls(); n < 2 {
					t.Fatalf("%d calls: no retry", n)
				}
			})
		})
	}
}

// Under throttling that does not end, a waited send fails when its deadline
// passes, not before, with an error that says both.
func TestThrottledSendFailsOnlyAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &throttler{whole: -1}
		sends := batch.NewSends(f, 2, nil)
		batch.FastRetries(sends)
		defer sends.Close(context.Background())
		const wait = 300 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		start := time.Now()
		_, err := sends.Do(ctx, "q", sendEntry("hello"))
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) || !awserr.IsThrottle(err) {
			t.Fatalf("err = %v, want one matching the deadline and the throttling", err)
		}
		if took != wait {
			t.Fatalf("failed after %v, not at its deadline of %v", took, wait)
		}
		if n := f.Calls(); n < 3 {
			t.Fatalf("%d calls in %v: retries do not go on until the deadline", n, wait)
		}
		// No retry outlives the caller (one due at the deadline's instant
		// may still go).
		n := f.Calls()
		testtime.Advance(time.Second)
		if m := f.Calls(); m > n+1 {
			t.Fatalf("%d calls after the deadline", m-n)
		}
	})
}

// Entries nobody waits for (deletes, visibility changes) retry throttling
// and server faults a bounded number of times, so Flush and Close end;
// client errors are not retried.
func TestUnwaitedEntriesRetryThrottlingBoundedly(t *testing.T) {
	t.Run("recovers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &throttler{whole: 1, entries: 2}
			dels := batch.NewDeletes(f, 2, 0)
			batch.FastRetries(dels)
			var mu sync.Mutex
			var errs []error
			for i := range 3 {
				dels.Submit("q", "h"+strconv.Itoa(i), func(_ struct{}, err error) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				})
			}
			if err := dels.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(errs) != 3 || errs[0] != nil || errs[1] != nil || errs[2] != nil {
				t.Fatalf("results %v: throttled deletes were not retried", errs)
			}
		})
	})
	t.Run("gives up", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &throttler{whole: -1}
			vis := batch.NewVisibilities(f, 2)
			batch.FastRetries(vis)
			got := make(chan error, 1)
			vis.Submit("q", batch.Visibility{ReceiptHandle: "h", Timeout: 0}, func(_ struct{}, err error) { got <- err })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := vis.Close(ctx); err != nil {
				t.Fatalf("Close under endless throttling: %v", err)
			}
			if err := <-got; !awserr.IsThrottle(err) {
				t.Fatalf("err = %v, want the throttling", err)
			}
			if n := f.Calls(); n != 1+batch.DefaultMaxRetries {
				t.Fatalf("%d calls, want 1 + %d retries", n, batch.DefaultMaxRetries)
			}
		})
	})
	t.Run("other errors", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &throttler{entries: 1, entryErr: types.BatchResultErrorEntry{Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("bad"), SenderFault: true}}
			dels := batch.NewDeletes(f, 2, 0)
			batch.FastRetries(dels)
			got := make(chan error, 1)
			dels.Submit("q", "h", func(_ struct{}, err error) { got <- err })
			if err := dels.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err == nil || f.Calls() != 1 {
				t.Fatalf("err %v after %d calls: a client error must not be retried", err, f.Calls())
			}
		})
	})
	t.Run("server faults of unwaited entries", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &throttler{whole: 1, wholeErr: &smithy.GenericAPIError{Code: "InternalError", Message: "500", Fault: smithy.FaultServer}}
			dels := batch.NewDeletes(f, 2, 0)
			batch.FastRetries(dels)
			got := make(chan error, 1)
			dels.Submit("q", "h", func(_ struct{}, err error) { got <- err })
			if err := dels.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil || f.Calls() != 2 {
				t.Fatalf("err %v after %d calls: a server fault is retried for entries nobody waits for too", err, f.Calls())
			}
		})
	})
}

// A Close whose context ends abandons entries waiting to retry: their
// callbacks get the last error and no call starts after Close returns.
func TestCloseAbandonsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &throttler{whole: -1}
		dels := batch.NewDeletes(f, 2, 0)
		batch.SlowRetries(dels)
		got := make(chan error, 1)
		dels.Submit("q", "h", func(_ struct{}, err error) { got <- err })
		synctest.Wait() // the first call fails; a retry waits
		if n := f.Calls(); n != 1 {
			t.Fatalf("%d calls before the retry's wait ended, want 1", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := dels.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want its context's error", err)
		}
		select {
		case err := <-got:
			if !awserr.IsThrottle(err) {
				t.Fatalf("abandoned entry got %v", err)
			}
		case <-time.After(time.Second):
			t.Fatal("abandoned entry got no result")
		}
		n := f.Calls()
		testtime.Advance(time.Minute)
		if m := f.Calls(); m != n {
			t.Fatalf("%d calls after Close returned", m-n)
		}
	})
}

// Call, for sends that are not batched, retries as Do does.
func TestCallRetriesUntilTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		calls := 0
		err := batch.Call(ctx, func() error {
			if calls++; calls <= 3 {
				return throttleErr("SendMessage")
			}
			return nil
		})
		if err != nil || calls != 4 {
			t.Fatalf("after %d calls: %v", calls, err)
		}

		ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		calls = 0
		err = batch.Call(ctx, func() error { calls++; return throttleErr("SendMessage") })
		if !errors.Is(err, context.DeadlineExceeded) || !awserr.IsThrottle(err) || calls < 2 {
			t.Fatalf("after %d calls: %v, want the deadline and the throttling", calls, err)
		}

		calls = 0
		bad := &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "no", Fault: smithy.FaultClient}
		if err := batch.Call(context.Background(), func() error { calls++; return bad }); !errors.Is(err, bad) || calls != 1 {
			t.Fatalf("a client error was retried: %d calls, %v", calls, err)
		}
	})
}
