package reap

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/heartbeat"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// needRetention is heartbeat.Need in whole seconds, rounded up.
func TestNeedRetention(t *testing.T) {
	o := Config{Period: defaultPeriod}
	for _, n := range []int{1, 1000, 3000, 10000} {
		need := heartbeat.Need(n, defaultPeriod)
		if got := needRetention(n, o); got%time.Second != 0 || got < need || got >= need+time.Second {
			t.Errorf("needRetention(%d) = %v, want %v rounded up to a second", n, got, need)
		}
	}
}

// An estimate lists the whole prefix while it holds fewer than 1,000
// queues (less the lease queue), then a sixteenth of it chosen by a hex
// digit, in one call once the sample size is known.
func TestFleetCount(t *testing.T) {
	t.Parallel()
	srv := sqstest.NewServer()
	defer func() { _ = srv.Close(context.Background()) }()
	client := srv.Client()
	ctx := context.Background()
	const prefix = "fleetsize_"
	create := func(name string) {
		in := &sqs.CreateQueueInput{QueueName: aws.String(name)}
		if name == prefix+coordinationSuffix {
			in.Attributes = map[string]string{"FifoQueue": "true"}
		}
		if _, err := client.CreateQueue(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	create(prefix + coordinationSuffix)
	for i := range 40 {
		create(fmt.Sprintf("%s%s-%d", prefix, uuid.NewString(), i))
	}
	var calls int
	counting := &listCounter{Client: client, n: &calls}
	o, err := buildOptions("test", []func(*Config){func(o *Config) { o.Prefix = prefix }})
	if err != nil {
		t.Fatal(err)
	}
	f := newFleet(counting, o, heartbeat.New(counting, heartbeat.Options{}))
	if n, err := f.count(ctx); err != nil || n != 40 || calls != 1 {
		t.Fatalf("count = %d, %v in %d calls; want 40 in 1", n, err, calls)
	}
	// 3,200 more, their first hex digit spread evenly: a sixteenth of the
	// fleet is 200 of them and about 2.5 of the 40.
	for i := range 3200 {
		id := uuid.NewString()
		create(fmt.Sprintf("%s%c%s-0", prefix, hexDigits[i%16], id[1:]))
	}
	calls = 0
	n, err := f.count(ctx)
	if err != nil || calls != 2 || f.depth != 1 {
		t.Fatalf("count = %d, %v in %d calls, depth %d; want 2 calls (a full page, then a sample), depth 1", n, err, calls, f.depth)
	}
	if n < 3240*9/10 || n > 3240*11/10 {
		t.Errorf("count = %d, want 3,240 ± 10%%", n)
	}
	calls = 0
	if _, err := f.count(ctx); err != nil || calls != 1 {
		t.Errorf("the next count took %d calls (%v), want 1", calls, err)
	}
}

type listCounter struct {
	*sqs.Client
	n *int
}

func (l *listCounter) ListQueues(ctx context.Context, in *sqs.ListQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error) {
	*l.n++
	return l.Client.ListQueues(ctx, in, optFns...)
}

// A Reaper tags a new queue with the retention its fleet needs: the
// configured one in a small fleet, a multiple in a large one (2,500 queues
// need 479 s at the defaults, so 600 for 300 configured), the configured
// one without an estimate when sweeping is disabled.
func TestTagsFitTheFleet(t *testing.T) {
	t.Parallel()
	srv := sqstest.NewServer()
	defer func() { _ = srv.Close(context.Background()) }()
	client := srv.Client()
	ctx := context.Background()
	const prefix = "fleettags_"
	retentionOf := func(disable bool) string {
		t.Helper()
		r, err := New(client, func(o *Config) { o.Prefix, o.DisableSweeping = prefix, disable })
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = r.Close(ctx) }()
		tags := r.Tags(ctx, 300*time.Second)
		if tags[sqsapi.HeartbeatTag] == "" {
			t.Fatalf("Tags = %v: no heartbeat", tags)
		}
		return tags[sqsapi.RetentionTag]
	}
	if got := retentionOf(false); got != "300" {
		t.Errorf("empty fleet: retention %q, want 300", got)
	}
	for i := range 2500 {
		if _, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("%s%s-%d", prefix, uuid.NewString(), i))}); err != nil {
			t.Fatal(err)
		}
	}
	if got := retentionOf(false); got != "600" {
		t.Errorf("2,500 queues: retention %q, want 600", got)
	}
	if got := retentionOf(true); got != "300" {
		t.Errorf("2,500 queues, sweeping disabled: retention %q, want 300", got)
	}
}

// The sweeper warns when the retentions it read add up to more tagging
// than the quota's planned share, by the same model the fit uses: 1,800
// queues at 300 s fit, 3,000 do not.
func TestCheckCapacityWarns(t *testing.T) {
	for _, c := range []struct {
		queues int
		warn   bool
	}{{1800, false}, {3000, true}} {
		var buf bytes.Buffer
		o := Config{Prefix: "p_", Period: defaultPeriod, Logger: slog.New(slog.NewTextHandler(&buf, nil))}
		s := newSweeper(nil, o, nil, nil)
		perQueue := 1 / (300 * heartbeat.DefaultFraction) // heartbeats a second of a 300 s queue
		s.checkCapacity(perQueue*100, 100, c.queues)      // 100 inspected, all at 300 s
		if got := strings.Contains(buf.String(), "recommended_retention"); got != c.warn {
			t.Errorf("%d queues at 300 s: warned %v, want %v (%s)", c.queues, got, c.warn, buf.String())
		}
	}
}
