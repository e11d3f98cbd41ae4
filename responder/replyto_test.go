package responder

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestReplyPolicyAllows(t *testing.T) {
	const (
		pre  = sqsapi.DefaultQueuePrefix
		aws1 = "https://sqs.us-east-1.amazonaws.com/111122223333/"
	)
	cases := []struct {
		name           string
		allow          []string
		request, reply string
		want           bool
	}{
		{"host queue next to the request queue", nil, aws1 + "orders", aws1 + pre + "8bd2e05a-0", true},
		{"FIFO host queue", nil, aws1 + "orders.fifo", aws1 + pre + "8bd2e05a-0.fifo", true},
		{"unprefixed queue", nil, aws1 + "orders", aws1 + "billing", false},
		{"prefix not at the start", nil, aws1 + "orders", aws1 + "x" + pre, false},
		{"foreign account", nil, aws1 + "orders", "https://sqs.us-east-1.amazonaws.com/999999999999/" + pre + "x", false},
		{"another region", nil, aws1 + "orders", "https://sqs.eu-west-1.amazonaws.com/111122223333/" + pre + "x", false},
		{"another partition", nil, aws1 + "orders", "https://sqs.us-east-1.amazonaws.com.cn/111122223333/" + pre + "x", false},
		{"China partition", nil, "https://sqs.cn-north-1.amazonaws.com.cn/111122223333/orders", "https://sqs.cn-north-1.amazonaws.com.cn/111122223333/" + pre + "x", true},
		{"dual-stack endpoint, same region", nil, aws1 + "orders", "https://sqs.us-east-1.api.aws/111122223333/" + pre + "x", true},
		{"dual-stack endpoint, another region", nil, aws1 + "orders", "https://sqs.eu-west-1.api.aws/111122223333/" + pre + "x", false},
		{"port on AWS", nil, aws1 + "orders", "https://sqs.us-east-1.amazonaws.com:443/111122223333/" + pre + "x", true},
		{"percent escape", nil, aws1 + "orders", "https://sqs.us-east-1.amazonaws.com/111122223333/%5F_RequesterClientQueues__x", false},
		{"legacy host, same region", nil, aws1 + "orders", "https://us-east-1.queue.amazonaws.com/111122223333/" + pre + "x", true},
		{"legacy global host is us-east-1", nil, aws1 + "orders", "https://queue.amazonaws.com/111122223333/" + pre + "x", true},
		{"VPC endpoint, same region", nil, aws1 + "orders", "https://vpce-0a1b-2c3d.sqs.us-east-1.vpce.amazonaws.com/111122223333/" + pre + "x", true},
		{"host case", nil, aws1 + "orders", "https://SQS.US-EAST-1.amazonaws.com/111122223333/" + pre + "x", true},
		{"look-alike host", nil, aws1 + "orders", "https://sqs.us-east-1.amazonaws.com.evil.example/111122223333/" + pre + "x", false},
		{"plain http to AWS", nil, aws1 + "orders", "http://sqs.us-east-1.amazonaws.com/111122223333/" + pre + "x", false},
		{"local endpoint", nil, "http://127.0.0.1:4566/000000000000/orders", "http://127.0.0.1:4566/000000000000/" + pre + "x", true},
		{"local endpoint, other port", nil, "http://127.0.0.1:4566/000000000000/orders", "http://127.0.0.1:4567/000000000000/" + pre + "x", false},
		{"local endpoint, other host", nil, "http://127.0.0.1:4566/000000000000/orders", "http://10.0.0.9:4566/000000000000/" + pre + "x", false},
		{"local endpoint, other scheme", nil, "http://127.0.0.1:4566/000000000000/orders", "https://127.0.0.1:4566/000000000000/" + pre + "x", false},
		{"local endpoint, other account", nil, "http://127.0.0.1:4566/000000000000/orders", "http://127.0.0.1:4566/000000000001/" + pre + "x", false},
		{"loopback: localhost and 127.0.0.1", nil, "http://localhost:4566/000000000000/orders", "http://127.0.0.1:4566/000000000000/" + pre + "x", true},
		{"loopback: fauxqs's sqs.<region>.localhost", nil, "http://127.0.0.1:4566/000000000000/orders", "http://sqs.us-east-1.localhost:4566/000000000000/" + pre + "x", true},
		{"loopback: LocalStack's host name", nil, "http://sqs.eu-west-1.localhost.localstack.cloud:4566/000000000000/orders", "http://localhost:4566/000000000000/" + pre + "x", true},
		{"loopback: 127.0.0.0/8 and ::1", nil, "http://127.1.2.3:4566/000000000000/orders", "http://[::1]:4566/000000000000/" + pre + "x", true},
		{"loopback: default port", nil, "http://localhost/000000000000/orders", "http://127.0.0.1:80/000000000000/" + pre + "x", true},
		{"loopback: other port", nil, "http://localhost:4566/000000000000/orders", "http://127.0.0.1:4567/000000000000/" + pre + "x", false},
		{"loopback: other scheme", nil, "http://localhost:4566/000000000000/orders", "https://127.0.0.1:4566/000000000000/" + pre + "x", false},
		{"loopback: look-alike", nil, "http://localhost:4566/000000000000/orders", "http://localhost.evil.example:4566/000000000000/" + pre + "x", false},
		{"loopback: not this machine", nil, "http://localhost:4566/000000000000/orders", "http://128.0.0.1:4566/000000000000/" + pre + "x", false},
		{"extra path segment", nil, aws1 + "orders", aws1 + "x/" + pre + "x", false},
		{"dot segments", nil, aws1 + "orders", "https://sqs.us-east-1.amazonaws.com/999999999999/../111122223333/" + pre + "x", false},
		{"query", nil, aws1 + "orders", aws1 + pre + "x?a=b", false},
		{"user info", nil, aws1 + "orders", "https://u@sqs.us-east-1.amazonaws.com/111122223333/" + pre + "x", false},
		{"not a URL", nil, aws1 + "orders", "::", false},
		{"bad request queue URL", nil, "orders", aws1 + pre + "x", false},

		{"name prefix allows", []string{"billing-"}, aws1 + "orders", aws1 + "billing-replies", true},
		{"name prefix keeps the account", []string{"billing-"}, aws1 + "orders", "https://sqs.us-east-1.amazonaws.com/999999999999/billing-replies", false},
		{"name prefix keeps the region", []string{"billing-"}, aws1 + "orders", "https://sqs.eu-west-1.amazonaws.com/111122223333/billing-replies", false},
		{"URL prefix allows another account", []string{"https://sqs.eu-west-1.amazonaws.com/999999999999/"}, aws1 + "orders", "https://sqs.eu-west-1.amazonaws.com/999999999999/anything", true},
		{"URL prefix compares case-blind hosts", []string{"HTTPS://SQS.eu-west-1.amazonaws.com/999999999999/"}, aws1 + "orders", "https://sqs.EU-WEST-1.amazonaws.com/999999999999/anything", true},
		{"URL prefix is a prefix", []string{"https://sqs.eu-west-1.amazonaws.com/999999999999/app-"}, aws1 + "orders", "https://sqs.eu-west-1.amazonaws.com/999999999999/other", false},
		{"URL prefix on loopback", []string{"http://localhost:4566/000000000000/billing-"}, "http://127.0.0.1:4566/000000000000/orders", "http://sqs.us-east-1.localhost:4566/000000000000/billing-replies", true},
		{"URL prefix does not allow dot segments", []string{"https://sqs.eu-west-1.amazonaws.com/999999999999/"}, aws1 + "orders", "https://sqs.eu-west-1.amazonaws.com/999999999999/../888888888888/x", false},
	}
	for _, c := range cases {
		p, err := newReplyPolicy("test", c.allow)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := p.allows(c.request, c.reply); got != c.want {
			t.Errorf("%s: allows(%q, %q) = %v, want %v", c.name, c.request, c.reply, got, c.want)
		}
	}
}

func TestAllowReplyToRejectsBadEntries(t *testing.T) {
	for _, bad := range []string{"", "has space", "https://", "https://host", "https://host/a?b", "ftp:/x", "a/b"} {
		_, err := New(sqs.New(sqs.Options{Region: "us-east-1"}), func(o *Options) { o.AllowReplyTo = []string{bad} })
		var ie *sqsapi.InvalidInputError
		if !errors.As(err, &ie) || ie.Param != "AllowReplyTo" {
			t.Errorf("AllowReplyTo %q: err = %v, want *InvalidInputError on AllowReplyTo", bad, err)
		}
	}
	if _, err := New(sqs.New(sqs.Options{Region: "us-east-1"}), func(o *Options) {
		o.AllowReplyTo = []string{"orders-rpc-", "https://sqs.eu-west-1.amazonaws.com/111122223333/"}
	}); err != nil {
		t.Errorf("good entries: %v", err)
	}
}

// otherAccount returns u, a queue URL, with another account.
func otherAccount(t *testing.T, u string) string {
	t.Helper()
	l, ok := parseQueueLocation(u)
	if !ok {
		t.Fatalf("%q is not a queue URL", u)
	}
	return l.scheme + "://" + l.host + "/999999999999/" + l.name
}

// A request whose ResponseQueueUrl names a queue the responder may not
// write to (another account, a queue not named as a requester's host) is
// deleted unanswered: nothing is sent there, the handler does not run, and
// it is counted and logged once. A Java-style virtual queue URL on a host
// queue with the default prefix is answered; AllowReplyTo widens the rest.
func TestReplyToForeignQueueRefused(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		t.Parallel()
		e := newEnv(t, be)
		ctx := context.Background()
		host := e.replyQueue("host", nil)
		plain := e.queue("plain", nil)
		reqQ := e.queue("req", map[string]string{"VisibilityTimeout": "1"})

		var logs bytes.Buffer
		var runs atomic.Int64
		r := newResponder(t, e.client, func(o *Options) {
			o.PollWaitTime = time.Second
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		})
		e.request(reqQ, "foreign", otherAccount(t, host)+"#vq", "rid-foreign")
		e.request(reqQ, "plain", plain, "rid-plain")
		e.request(reqQ, "java", host+"#vq-java", "rid-java")
		serve(t, r, reqQ, HandlerFunc(func(ctx context.Context, req *Request) (*Reply, error) {
			runs.Add(1)
			return echo(ctx, req)
		}))
		waitFor(t, "three requests deleted", func() bool { return r.stats.Deleted.Load() == 3 })

		got := e.replies(host, 1, 5*time.Second)
		if len(got) != 1 || aws.ToString(got[0].Body) != "re:java" || attr(got[0], sqsapi.VirtualQueueNameAttribute) != "vq-java" {
			t.Fatalf("host queue got %v, want the one reply to the virtual queue", got)
		}
		if extra := e.replies(host, 1, time.Second); len(extra) != 0 {
			t.Errorf("host queue got a refused reply: %q", aws.ToString(extra[0].Body))
		}
		if got := e.replies(plain, 1, time.Second); len(got) != 0 {
			t.Errorf("unprefixed queue got a reply: %q", aws.ToString(got[0].Body))
		}
		if s := r.Stats(); s.Dropped != 2 || s.Handled != 1 || runs.Load() != 1 || s.Failed != 0 {
			t.Errorf("stats %+v, %d handler runs; want 2 dropped (refused), 1 handled", s, runs.Load())
		}
		if v, f := e.depth(reqQ); v != "0" || f != "0" {
			t.Errorf("request queue holds %s visible, %s in flight; want the refused requests deleted", v, f)
		}
		if n := strings.Count(logs.String(), "refusing a reply"); n != 1 {
			t.Errorf("%d refusals logged, want 1 (rate-limited):\n%s", n, logs.String())
		}

		// SendResponseMessage refuses with an error and sends nothing (the
		// serving responder's receives share the counter, so count sends).
		e.counter.Reset()
		err := r.SendResponseMessage(ctx, reqQ, msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: plain}), &Reply{Body: "b"})
		if !errors.Is(err, ErrReplyRefused) || e.counter.Get("SendMessage")+e.counter.Get("SendMessageBatch") != 0 {
			t.Errorf("SendResponseMessage to an unprefixed queue: %v after %v calls, want ErrReplyRefused and none", err, e.counter.Snapshot())
		}

		// AllowReplyTo widens it, through Process as a Lambda function
		// would handle the request.
		wide := newResponder(t, e.client, func(o *Options) { o.AllowReplyTo = []string{"tq-"} })
		req := msgWith(map[string]string{sqsapi.ResponseQueueURLAttribute: plain, sqsapi.RequestIDAttribute: "rid-wide"})
		if err := wide.Process(ctx, reqQ, req, echo); err != nil {
			t.Fatalf("Process with AllowReplyTo: %v", err)
		}
		if got := e.replies(plain, 1, 5*time.Second); len(got) != 1 || aws.ToString(got[0].Body) != "re:x" {
			t.Errorf("with AllowReplyTo the unprefixed queue got %v, want the reply", got)
		}
		// Process also refuses, and the request is done (to be deleted).
		if err := r.Process(ctx, reqQ, req, echo); err != nil || r.Stats().Dropped != 3 {
			t.Errorf("Process of a refused request = %v, %d dropped; want nil (delete it) and 3", err, r.Stats().Dropped)
		}
	})
}

// TestRepliesReachEveryLoopbackSpelling serves a request queue named by
// localhost while the requester's host queue is named as the server names
// it (127.0.0.1 on sqstest, sqs.us-east-1.localhost on fauxqs): one
// endpoint, so the default AllowReplyTo lets the reply through.
func TestRepliesReachEveryLoopbackSpelling(t *testing.T) {
	t.Parallel()
	sqstestenv.Each(t, func(t *testing.T, be *sqstestenv.Backend) {
		t.Parallel()
		ep, err := url.Parse(be.Endpoint)
		if err != nil || ep.Port() == "" {
			t.Skipf("endpoint %q is not a local server", be.Endpoint)
		}
		e := newEnv(t, be)
		created, err := url.Parse(e.queue("req", nil))
		if err != nil {
			t.Fatal(err)
		}
		reqQ := "http://localhost:" + ep.Port() + created.Path
		r := newResponder(t, e.client)
		serve(t, r, reqQ, HandlerFunc(echo))
		rq, err := requester.New(e.client)
		if err != nil {
			t.Fatal(err)
		}
		defer rq.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		reply, err := rq.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: &reqQ, MessageBody: aws.String("x")})
		if err != nil || aws.ToString(reply.Body) != "re:x" {
			t.Fatalf("a call to %s: %v, %v; want the reply (stats %+v)", reqQ, reply, err, r.Stats())
		}
	})
}
