package faultproxy_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/internal/awserr"
	"github.com/tempqueues/tempqueues/internal/testkit/faultproxy"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
)

// setup returns a proxy in front of a fresh sqstest server, an SDK client
// through the proxy without the SDK's retries (each fault reaches the
// caller), a client straight to the server, and a queue.
func setup(t *testing.T, seed uint64, rules ...faultproxy.Rule) (*faultproxy.Proxy, *sqs.Client, *sqs.Client, string) {
	t.Helper()
	b := sqstestenv.SQSTest(t)
	p := faultproxy.Start(t, b.Endpoint, seed, rules...)
	direct := sqstestenv.NewClient(b.Endpoint, nil)
	via := sqs.New(sqstestenv.NewClient(p.URL(), nil).Options(), func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	q, err := direct.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("fp")})
	if err != nil {
		t.Fatal(err)
	}
	return p, via, direct, aws.ToString(q.QueueUrl)
}

func send(c *sqs.Client, q string) error {
	_, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("x")})
	return err
}

func depth(t *testing.T, c *sqs.Client, q string) string {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q), AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"]
}

func TestFaultsAsTheSDKSeesThem(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		p, via, direct, q := setup(t, 1)
		if err := send(via, q); err != nil {
			t.Fatal(err)
		}
		if depth(t, direct, q) != "1" || p.Calls("SendMessage") != 1 || p.Injected("", faultproxy.Throttle) != 0 {
			t.Fatalf("plain proxy: %s", p.Summary())
		}
	})
	t.Run("throttle", func(t *testing.T) {
		p, via, direct, q := setup(t, 1, faultproxy.Rule{Op: "SendMessage", Kind: faultproxy.Throttle, Share: 1})
		err := send(via, q)
		var apiErr smithy.APIError
		if !awserr.IsThrottle(err) || !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ThrottlingException" {
			t.Fatalf("err = %v, want the SDK's throttling", err)
		}
		if depth(t, direct, q) != "0" || p.Injected("SendMessage", faultproxy.Throttle) != 1 {
			t.Fatalf("a throttled call reached the server: %s", p.Summary())
		}
	})
	t.Run("500", func(t *testing.T) {
		p, via, direct, q := setup(t, 1, faultproxy.Rule{Kind: faultproxy.ServerError, Share: 1})
		err := send(via, q)
		var apiErr smithy.APIError
		if !awserr.IsTransient(err) || awserr.IsThrottle(err) || !errors.As(err, &apiErr) || apiErr.ErrorFault() != smithy.FaultServer {
			t.Fatalf("err = %v, want a transient server fault", err)
		}
		if depth(t, direct, q) != "0" || p.Injected("", faultproxy.ServerError) != 1 {
			t.Fatalf("%s", p.Summary())
		}
	})
	t.Run("drop", func(t *testing.T) {
		p, via, direct, q := setup(t, 1, faultproxy.Rule{Op: "SendMessage", Kind: faultproxy.Drop, Share: 1})
		err := send(via, q)
		t.Logf("dropped response: %v", err)
		if err == nil || !awserr.IsTransient(err) {
			t.Fatalf("err = %v, want a connection error the SDK retries", err)
		}
		if depth(t, direct, q) != "1" || p.Injected("SendMessage", faultproxy.Drop) != 1 {
			t.Fatalf("a dropped call must still reach the server: %s", p.Summary())
		}
		// With the SDK's retries, a dropped send is sent again: a duplicate.
		retrying := sqstestenv.NewClient(p.URL(), nil)
		p.SetRules(faultproxy.Rule{Op: "SendMessage", Kind: faultproxy.Drop, Share: 0.5})
		var dups int64
		for range 10 {
			before := p.Injected("SendMessage", faultproxy.Drop)
			if err := send(retrying, q); err != nil {
				t.Fatalf("SDK retry of a dropped response: %v", err)
			}
			dups += p.Injected("SendMessage", faultproxy.Drop) - before
		}
		if got := depth(t, direct, q); got != strconv.FormatInt(1+10+dups, 10) {
			t.Fatalf("queue holds %s, want %d (1 + 10 sends + %d duplicates)", got, 1+10+dups, dups)
		}
	})
	t.Run("delay", func(t *testing.T) {
		_, via, _, q := setup(t, 1, faultproxy.Rule{Op: "SendMessage", Kind: faultproxy.Delay, Share: 1, Delay: 200 * time.Millisecond})
		start := time.Now()
		if err := send(via, q); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Fatalf("call took %v, want the 200ms delay", d)
		}
	})
}

// The same seed gives the same faults to the same sequence of calls, and
// the share is roughly kept.
func TestSeededRunsRepeat(t *testing.T) {
	run := func(seed uint64) []bool {
		_, via, _, q := setup(t, seed, faultproxy.Rule{Op: "SendMessage", Kind: faultproxy.Throttle, Share: 0.3})
		var failed []bool
		for range 60 {
			failed = append(failed, send(via, q) != nil)
		}
		return failed
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 7 gave different faults:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 7 and 8 gave the same faults")
	}
	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	if n < 8 || n > 30 {
		t.Fatalf("%d of 60 calls throttled at a 30%% share", n)
	}
}
