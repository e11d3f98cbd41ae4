package responder

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/deflog"
	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// replyPolicy says which queues replies may go to (Options.AllowReplyTo).
type replyPolicy struct {
	names []string // queue-name prefixes, next to the request queue
	urls  []string // queue-URL prefixes, normalized by queueLocation.String
}

// newReplyPolicy checks the entries of Options.AllowReplyTo and sorts them
// into name and URL prefixes.
func newReplyPolicy(op string, allow []string) (replyPolicy, error) {
	var p replyPolicy
	for _, e := range allow {
		if !strings.Contains(e, "://") {
			if e == "" || !wire.ValidQueueName(e) && !wire.ValidQueueName(e+"x") {
				return p, wire.Invalid(op, "AllowReplyTo", "%q is neither a queue URL prefix (scheme://host/...) nor a queue name prefix (A-Z a-z 0-9 - _)", e)
			}
			p.names = append(p.names, e)
			continue
		}
		u, err := url.Parse(e)
		if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || !strings.HasPrefix(u.EscapedPath(), "/") {
			return p, wire.Invalid(op, "AllowReplyTo", "%q: a queue URL prefix has a scheme, a host and a path starting with '/' (e.g. https://sqs.us-east-1.amazonaws.com/123456789012/)", e)
		}
		p.urls = append(p.urls, strings.ToLower(u.Scheme)+"://"+strings.ToLower(u.Host)+u.EscapedPath())
	}
	return p, nil
}

// allows reports whether a reply may be sent to the queue target (the host
// queue of a virtual queue) for a request received from requestQueue.
func (p replyPolicy) allows(requestQueue, target string) bool {
	t, ok := parseQueueLocation(target)
	if !ok {
		return false
	}
	full := t.String()
	for _, prefix := range p.urls {
		if strings.HasPrefix(full, prefix) {
			return true
		}
	}
	q, ok := parseQueueLocation(requestQueue)
	if !ok || q.place != t.place || q.account != t.account {
		return false
	}
	if strings.HasPrefix(t.name, sqsapi.DefaultQueuePrefix) {
		return true
	}
	for _, prefix := range p.names {
		if strings.HasPrefix(t.name, prefix) {
			return true
		}
	}
	return false
}

// queueLocation is a queue URL taken apart: where the queue is (an AWS
// region, or another endpoint's scheme and host), its account and name.
type queueLocation struct {
	scheme, host string // lower case
	place        string // "aws:<region>" on AWS, else scheme://host
	account      string
	name         string
}

func (l queueLocation) String() string {
	return l.scheme + "://" + l.host + "/" + l.account + "/" + l.name
}

// parseQueueLocation takes apart a queue URL,
// http(s)://<host>/<account>/<name>, with nothing else: no user, query,
// fragment, or further path segment.
func parseQueueLocation(s string) (queueLocation, bool) {
	u, err := url.Parse(s)
	if err != nil || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Host == "" {
		return queueLocation{}, false
	}
	l := queueLocation{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Host)}
	if l.scheme != "http" && l.scheme != "https" {
		return queueLocation{}, false
	}
	account, name, ok := strings.Cut(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if !ok || !wire.ValidQueueName(account) || !wire.ValidQueueName(name) {
		return queueLocation{}, false
	}
	l.account, l.name = account, name
	l.place = l.scheme + "://" + l.host
	if region := awsRegion(u.Hostname()); region != "" && l.scheme == "https" {
		l.place = "aws:" + region
	}
	return l, true
}

// awsRegion returns the region of an SQS endpoint on AWS:
// sqs.<region>.amazonaws.com (and .amazonaws.com.cn, sqs-fips., VPC
// endpoints' vpce-….sqs.<region>.vpce.amazonaws.com), the legacy
// <region>.queue.amazonaws.com and queue.amazonaws.com (us-east-1); "" for
// any other host.
func awsRegion(host string) string {
	host = strings.ToLower(host)
	if !strings.HasSuffix(host, ".amazonaws.com") && !strings.HasSuffix(host, ".amazonaws.com.cn") {
		return ""
	}
	if host == "queue.amazonaws.com" {
		return "us-east-1"
	}
	labels := strings.Split(host, ".")
	for i, l := range labels {
		switch {
		case (l == "sqs" || l == "sqs-fips") && i+1 < len(labels):
			return labels[i+1]
		case l == "queue" && i == 1:
			return labels[0]
		}
	}
	return ""
}

// refusals rate-limits the log of refused replies: a flood of requests
// naming foreign queues must not flood the log.
type refusals struct {
	mu     sync.Mutex
	last   time.Time
	silent int64 // refusals not logged since last
}

// replyTarget returns the queue a reply to request, received from
// queueURL, goes to, and the virtual queue's name if any. The error is
// ErrNoResponseRequested, an *sqsapi.InvalidInputError for a malformed
// ResponseQueueUrl, or ErrReplyRefused (counted and logged) for a queue
// Options.AllowReplyTo does not allow.
func (r *Responder) replyTarget(ctx context.Context, queueURL string, request types.Message) (target, name string, err error) {
	u, ok := stringAttribute(request, sqsapi.ResponseQueueURLAttribute)
	if !ok || u == "" {
		return "", "", ErrNoResponseRequested
	}
	if target, name, err = responseTarget(u); err != nil {
		return "", "", err
	}
	if !r.replyTo.allows(queueURL, target) {
		return "", "", r.refuse(ctx, queueURL, u, request)
	}
	return target, name, nil
}

// refuse counts a refused reply, logs it (the first, then at most one a
// deflog.Interval, with the number left unlogged) and returns its error.
func (r *Responder) refuse(ctx context.Context, queueURL, responseURL string, request types.Message) error {
	r.stats.repliesRefused.Add(1)
	now := r.clk.Now()
	f := &r.refused
	f.mu.Lock()
	logIt := f.last.IsZero() || now.Sub(f.last) >= deflog.Interval
	silent := f.silent
	if logIt {
		f.last, f.silent = now, 0
	} else {
		f.silent++
	}
	f.mu.Unlock()
	if logIt {
		r.log.LogAttrs(ctx, slog.LevelWarn, "responder: refusing a reply to a queue Options.AllowReplyTo does not allow; request deleted unanswered",
			slog.String("queue_url", queueURL), slog.String("response_queue_url", responseURL),
			slog.String("request_id", requestID(request)), slog.Int64("refused_unlogged", silent))
	}
	return fmt.Errorf("%w: %s (request from %s)", ErrReplyRefused, responseURL, queueURL)
}
