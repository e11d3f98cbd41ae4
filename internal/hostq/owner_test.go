package hostq

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// fakeBeats is a Heartbeats that records what the Owner asks of it.
type fakeBeats struct {
	mu      sync.Mutex
	added   map[string]map[string]string // queue URL -> the tags it was added with
	removed []string
	addErr  error // AddTagged's answer, when set
}

func (f *fakeBeats) Tags(_ context.Context, retention time.Duration) map[string]string {
	return map[string]string{
		sqsapi.RetentionTag: strconv.Itoa(int(retention / time.Second)),
		sqsapi.HeartbeatTag: strconv.FormatInt(time.Now().UnixMilli(), 10),
	}
}

func (f *fakeBeats) AddTagged(u string, _ time.Duration, tags map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.addErr != nil {
		return f.addErr
	}
	if f.added == nil {
		f.added = map[string]map[string]string{}
	}
	f.added[u] = maps.Clone(tags)
	return nil
}

func (f *fakeBeats) Remove(u string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, u)
}

func (f *fakeBeats) state() (added map[string]map[string]string, removed []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.added), slices.Clone(f.removed)
}

// ownerRig is an Owner over an in-process sqstest server, in a synctest
// bubble, with a counter of the Owner's calls.
type ownerRig struct {
	t      *testing.T
	client *sqs.Client
	calls  *callcount.Counter
	beats  *fakeBeats
}

func newOwnerRig(t *testing.T) *ownerRig {
	client, _ := sqstestenv.InProcess(t).Client(t)
	return &ownerRig{t: t, client: client, calls: new(callcount.Counter), beats: &fakeBeats{}}
}

func (r *ownerRig) owner(client sqsapi.Client, edit func(*OwnerOptions)) *Owner {
	r.t.Helper()
	opts := OwnerOptions{Prefix: "__RequesterClientQueues__", Retention: 300 * time.Second, Heartbeats: r.beats, Calls: r.calls}
	if edit != nil {
		edit(&opts)
	}
	o, err := NewOwner("test", client, opts)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = o.Close(context.Background()) })
	return o
}

func (r *ownerRig) tags(u string) map[string]string {
	r.t.Helper()
	out, err := r.client.ListQueueTags(context.Background(), &sqs.ListQueueTagsInput{QueueUrl: aws.String(u)})
	if err != nil {
		r.t.Fatal(err)
	}
	return out.Tags
}

func (r *ownerRig) exists(u string) bool {
	r.t.Helper()
	_, err := r.client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u)})
	return err == nil
}

var hostName = regexp.MustCompile(`/__RequesterClientQueues__[0-9a-f-]{36}-(\d+)(\.fifo)?$`)

// hostNumber returns the counter at the end of a host queue URL, or fails
// when the name is not <prefix><uuid>-<n>.
func hostNumber(t *testing.T, u string) int {
	t.Helper()
	m := hostName.FindStringSubmatch(u)
	if m == nil {
		t.Fatalf("host queue URL %s: want <prefix><uuid>-<n>", u)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// NewOwner validates its options and makes no call.
func TestNewOwnerValidates(t *testing.T) {
	calls := new(callcount.Counter)
	ok := OwnerOptions{Prefix: "p_", Retention: time.Minute, Heartbeats: &fakeBeats{}, Calls: calls}
	for name, edit := range map[string]func(*OwnerOptions){
		"empty prefix":        func(o *OwnerOptions) { o.Prefix = "" },
		"bad prefix":          func(o *OwnerOptions) { o.Prefix = "a b" },
		"fifo prefix":         func(o *OwnerOptions) { o.Prefix = "p.fifo" },
		"long prefix":         func(o *OwnerOptions) { o.Prefix = string(make([]byte, maxPrefix+1)) },
		"short retention":     func(o *OwnerOptions) { o.Retention = 500 * time.Millisecond },
		"fractional seconds":  func(o *OwnerOptions) { o.Retention = 1500 * time.Millisecond },
		"no heartbeats":       func(o *OwnerOptions) { o.Heartbeats = nil },
		"heartbeat tag taken": func(o *OwnerOptions) { o.Tags = map[string]string{sqsapi.HeartbeatTag: "1"} },
		"retention tag taken": func(o *OwnerOptions) { o.Tags = map[string]string{sqsapi.RetentionTag: "1"} },
	} {
		opts := ok
		edit(&opts)
		if _, err := NewOwner("test", nil, opts); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("%s: NewOwner = %v, want invalid input", name, err)
		}
	}
	if _, err := NewOwner("test", nil, ok); err != nil {
		t.Errorf("valid options: %v", err)
	}
	if n := calls.Total(); n != 0 {
		t.Errorf("%d calls from NewOwner, want none", n)
	}
}

// An Owner creates one host queue per attribute set, on first use, named
// <prefix><uuid>-<n> (".fifo" added for FIFO), with the user's tags and the
// heartbeat tags in its one CreateQueue, and heartbeats it with those tags.
func TestOwnerCreatesOneQueuePerAttributeSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newOwnerRig(t)
		user := map[string]string{"team": "payments"}
		o := r.owner(r.client, func(opts *OwnerOptions) { opts.Tags = user })
		user["team"] = "changed after NewOwner" // the Owner keeps its copy
		ctx := context.Background()

		a, err := o.URL(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := r.calls.Get("CreateQueue"); n != 1 || r.calls.Total() != 1 {
			t.Errorf("calls %v for the first host queue, want one CreateQueue", r.calls.Snapshot())
		}
		if again, err := o.URL(ctx, map[string]string{}); err != nil || again != a {
			t.Errorf("URL again = %s, %v; want %s with no call", again, err, a)
		}
		b, err := o.URL(ctx, map[string]string{"VisibilityTimeout": "60"})
		if err != nil {
			t.Fatal(err)
		}
		f, err := o.URL(ctx, map[string]string{"FifoQueue": "true"})
		if err != nil {
			t.Fatal(err)
		}
		if n := r.calls.Get("CreateQueue"); n != 3 || r.calls.Total() != 3 {
			t.Errorf("calls %v for three attribute sets, want three CreateQueue", r.calls.Snapshot())
		}
		if na, nb, nf := hostNumber(t, a), hostNumber(t, b), hostNumber(t, f); na != 0 || nb != 1 || nf != 2 {
			t.Errorf("host queue numbers %d, %d, %d; want 0, 1, 2", na, nb, nf)
		}
		if m := hostName.FindStringSubmatch(f); m[2] != ".fifo" {
			t.Errorf("FIFO host queue %s has no .fifo suffix", f)
		}
		added, _ := r.beats.state()
		for _, u := range []string{a, b, f} {
			tags := r.tags(u)
			if tags["team"] != "payments" || tags[sqsapi.RetentionTag] != "300" || tags[sqsapi.HeartbeatTag] == "" || len(tags) != 3 {
				t.Errorf("%s created with tags %v: want the user's and the heartbeat tags", u, tags)
			}
			if !maps.Equal(added[u], tags) {
				t.Errorf("%s heartbeats with tags %v, created with %v", u, added[u], tags)
			}
		}
		if _, err := o.URL(ctx, map[string]string{"Bogus": "1"}); !errors.Is(err, sqsapi.ErrInvalidInput) {
			t.Errorf("URL with an unknown attribute = %v, want invalid input", err)
		}
	})
}

// Gone forgets a host queue (no call), stops its heartbeats and tells
// OnGone; the next use creates a new one. A URL it does not own is ignored.
func TestOwnerForgetsAQueueFoundGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newOwnerRig(t)
		var gone []string
		o := r.owner(r.client, func(opts *OwnerOptions) { opts.OnGone = func(u string) { gone = append(gone, u) } })
		ctx := context.Background()
		a, err := o.URL(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		o.Gone(a + "-other")
		if len(gone) != 0 {
			t.Fatalf("OnGone(%v) for a queue the Owner does not own", gone)
		}
		if _, err := r.client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(a)}); err != nil {
			t.Fatal(err)
		}
		before := r.calls.Total()
		o.Gone(a)
		o.Gone(a) // once only
		if n := r.calls.Total() - before; n != 0 {
			t.Errorf("%d calls from Gone, want none", n)
		}
		if _, removed := r.beats.state(); !slices.Equal(removed, []string{a}) {
			t.Errorf("heartbeats removed %v, want %s once", removed, a)
		}
		if !slices.Equal(gone, []string{a}) {
			t.Errorf("OnGone told %v, want %s once", gone, a)
		}
		b, err := o.URL(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if b == a || hostNumber(t, b) != 1 || !r.exists(b) {
			t.Errorf("after Gone, URL = %s (was %s): want a new host queue, number 1", b, a)
		}
	})
}

// Close stops the heartbeats of the owned queues and deletes them; it is
// idempotent, and later uses fail with ErrClosed.
func TestOwnerCloseDeletesItsQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newOwnerRig(t)
		o := r.owner(r.client, nil)
		ctx := context.Background()
		a, err := o.URL(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := o.URL(ctx, map[string]string{"VisibilityTimeout": "60"})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if r.exists(a) || r.exists(b) {
			t.Error("an owned host queue outlived Close")
		}
		if _, removed := r.beats.state(); len(removed) != 2 || !slices.Contains(removed, a) || !slices.Contains(removed, b) {
			t.Errorf("heartbeats removed %v, want both queues", removed)
		}
		n := r.calls.Total()
		if err := o.Close(ctx); err != nil {
			t.Errorf("second Close = %v", err)
		}
		if _, err := o.URL(ctx, nil); !errors.Is(err, sqsapi.ErrClosed) {
			t.Errorf("URL after Close = %v, want ErrClosed", err)
		}
		if m := r.calls.Total(); m != n {
			t.Errorf("%d calls after the first Close, want none", m-n)
		}
	})
}

// lostReply is a client whose CreateQueue reaches the server and then
// fails, as when a response is lost, while fail is set.
type lostReply struct {
	sqsapi.Client
	mu    sync.Mutex
	fail  bool
	names []string
}

func (l *lostReply) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	out, err := l.Client.CreateQueue(ctx, in, optFns...)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, aws.ToString(in.QueueName))
	if err == nil && l.fail {
		return nil, errors.New("connection reset")
	}
	return out, err
}

// A CreateQueue whose answer was lost may have created the queue: the
// next attempt asks for the same name, and Close deletes a queue whose
// creation it never saw succeed.
func TestOwnerRetriesAndCleansUpALostCreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newOwnerRig(t)
		lost := &lostReply{Client: r.client, fail: true}
		o := r.owner(lost, nil)
		ctx := context.Background()
		if _, err := o.URL(ctx, nil); err == nil {
			t.Fatal("URL succeeded with the CreateQueue answer lost")
		}
		if _, err := o.URL(ctx, map[string]string{"FifoQueue": "true"}); err == nil {
			t.Fatal("URL succeeded with the CreateQueue answer lost")
		}
		lost.mu.Lock()
		lost.fail = false
		lost.mu.Unlock()
		a, err := o.URL(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		lost.mu.Lock()
		names := slices.Clone(lost.names)
		lost.mu.Unlock()
		if len(names) != 3 || names[2] != names[0] {
			t.Fatalf("CreateQueue names %v: the retry must ask for the name that failed", names)
		}
		fifo, err := r.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(names[1])})
		if err != nil {
			t.Fatalf("the FIFO queue whose answer was lost: %v", err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if r.exists(a) || r.exists(aws.ToString(fifo.QueueUrl)) {
			t.Error("Close left a host queue behind")
		}
	})
}

// A queue the Heartbeats refuse (Close ran meanwhile) is deleted at once:
// nobody would heartbeat or delete it.
func TestOwnerDeletesAQueueItCannotHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newOwnerRig(t)
		r.beats.addErr = sqsapi.ErrClosed
		o := r.owner(r.client, nil)
		if _, err := o.URL(context.Background(), nil); !errors.Is(err, sqsapi.ErrClosed) {
			t.Fatalf("URL = %v, want ErrClosed", err)
		}
		if n, d := r.calls.Get("CreateQueue"), r.calls.Get("DeleteQueue"); n != 1 || d != 1 {
			t.Errorf("calls %v: want the queue created and deleted", r.calls.Snapshot())
		}
		out, err := r.client.ListQueues(context.Background(), &sqs.ListQueuesInput{})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.QueueUrls) != 0 {
			t.Errorf("queues %v left behind", out.QueueUrls)
		}
	})
}

// Open, with OwnerOptions.Host set, opens the runtime Host over the owned
// queue once; a Host found gone tells the Owner, which forgets the queue
// and ends the Host; Close closes the live Host.
func TestOwnerOpensHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newOwnerRig(t)
		var gone []string
		o := r.owner(r.client, func(opts *OwnerOptions) {
			opts.Host = &Options{}
			opts.OnGone = func(u string) { gone = append(gone, u) }
		})
		ctx := context.Background()
		h, err := o.Open(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := o.Open(ctx, nil); err != nil || again != h {
			t.Fatalf("Open again = %p, %v; want the same Host", again, err)
		}
		if u, _ := o.URL(ctx, nil); u != h.URL() {
			t.Errorf("URL %s, Host's %s", u, h.URL())
		}
		o.opts.Host.OnGone(h) // as the Host does when it finds its queue deleted
		if !slices.Equal(gone, []string{h.URL()}) {
			t.Fatalf("OnGone told %v, want the Host's queue", gone)
		}
		h2, err := o.Open(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if h2 == h {
			t.Fatal("Open after the Host was gone returned it again")
		}
		if _, err := h.CreateQueue("q", 0, nil, 0); err == nil {
			t.Error("the Host found gone still makes virtual queues")
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := h2.CreateQueue("q", 0, nil, 0); !errors.Is(err, sqsapi.ErrClosed) {
			t.Errorf("the live Host after Close: CreateQueue = %v, want ErrClosed", err)
		}
	})
}
