package responder

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
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
		scheme := strings.ToLower(u.Scheme)
		p.urls = append(p.urls, scheme+"://"+canonicalHost(scheme, strings.ToLower(u.Host))+u.EscapedPath())
	}
	return p, nil
}

// allows reports whether a reply may be sent to the queue target (the host
// queue of a virtual queue) for a request received from requestQueue. It
// runs for every request, so it parses by hand and allocates nothing in
// the default case.
func (p replyPolicy) allows(requestQueue, target string) bool {
	t, ok := parseQueueLocation(target)
	if !ok {
		return false
	}
	if len(p.urls) > 0 {
		full := t.String()
		for _, prefix := range p.urls {
			if strings.HasPrefix(full, prefix) {
				return true
			}
		}
	}
	q, ok := parseQueueLocation(requestQueue)
	if !ok || !q.samePlace(t) || q.account != t.account {
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
	region       string // on AWS (https only); "" elsewhere
	account      string
	name         string
}

// samePlace reports whether l and o are in one region of AWS, or at one
// endpoint elsewhere.
func (l queueLocation) samePlace(o queueLocation) bool {
	if l.region != "" || o.region != "" {
		return l.region == o.region
	}
	return l.scheme == o.scheme && l.host == o.host
}

func (l queueLocation) String() string {
	return l.scheme + "://" + l.host + "/" + l.account + "/" + l.name
}

// parseQueueLocation takes apart a queue URL,
// http(s)://<host>/<account>/<name>, with nothing else: no user, query,
// fragment, escape, or further path segment.
func parseQueueLocation(s string) (queueLocation, bool) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || strings.ContainsAny(rest, "?#@%\\") {
		return queueLocation{}, false
	}
	var l queueLocation
	switch l.scheme = strings.ToLower(scheme); l.scheme {
	case "http", "https":
	default:
		return queueLocation{}, false
	}
	host, path, _ := strings.Cut(rest, "/")
	account, name, _ := strings.Cut(path, "/")
	if !validHost(host) || !wire.ValidQueueName(account) || !wire.ValidQueueName(name) {
		return queueLocation{}, false
	}
	l.host, l.account, l.name = canonicalHost(l.scheme, strings.ToLower(host)), account, name
	if l.scheme == "https" {
		l.region = awsRegion(l.host)
	}
	return l, true
}

// loopbackHost stands for every spelling of this machine's loopback in a
// queueLocation: brackets keep it from being a real host name.
const loopbackHost = "[loopback]"

// canonicalHost returns host (lower case, maybe with a port) as a
// queueLocation holds it: without the scheme's default port, and with
// any loopback name or address (isLoopback) as loopbackHost, so that
// http://localhost:4566 and http://127.0.0.1:4566 are one endpoint.
func canonicalHost(scheme, host string) string {
	name, port := host, ""
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			name, port = host[1:i], strings.TrimPrefix(host[i+1:], ":")
		}
	} else if strings.Count(host, ":") == 1 {
		name, port, _ = strings.Cut(host, ":")
	}
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	switch {
	case isLoopback(name):
		name = loopbackHost
	case strings.Contains(name, ":"):
		name = "[" + name + "]"
	}
	if port == "" {
		return name
	}
	return name + ":" + port
}

// isLoopback reports whether name (lower case, no port or brackets) is
// this machine's loopback: an address in 127.0.0.0/8 or ::1, localhost
// or a name under .localhost (RFC 6761; fauxqs's sqs.<region>.localhost),
// or LocalStack's localhost.localstack.cloud and the names under it.
func isLoopback(name string) bool {
	switch {
	case name == "localhost", strings.HasSuffix(name, ".localhost"),
		name == "localhost.localstack.cloud", strings.HasSuffix(name, ".localhost.localstack.cloud"):
		return true
	}
	a, err := netip.ParseAddr(name)
	return err == nil && a.Unmap().IsLoopback()
}

// validHost reports whether h is a host[:port] of letters, digits, '-',
// '.', and ':' (a port, or an IPv6 literal in brackets).
func validHost(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}

// awsRegion returns the region of an SQS endpoint on AWS, with ".cn" for
// the China partition: sqs.<region>.amazonaws.com (and sqs-fips., VPC
// endpoints' vpce-….sqs.<region>.vpce.amazonaws.com, .amazonaws.com.cn,
// dual-stack sqs.<region>.api.aws),
// the legacy <region>.queue.amazonaws.com and queue.amazonaws.com
// (us-east-1); "" for any other host. host is lower case, maybe with a
// port.
func awsRegion(host string) string {
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		host = host[:i]
	}
	partition := ""
	switch {
	case strings.HasSuffix(host, ".amazonaws.com"), strings.HasSuffix(host, ".api.aws"):
	case strings.HasSuffix(host, ".amazonaws.com.cn"), strings.HasSuffix(host, ".api.amazonwebservices.com.cn"):
		partition = ".cn"
	default:
		return ""
	}
	if host == "queue.amazonaws.com" {
		return "us-east-1"
	}
	first, rest, _ := strings.Cut(host, ".")
	if next, _, _ := strings.Cut(rest, "."); next == "queue" {
		return first + partition
	}
	for label, rest := first, rest; rest != ""; {
		var next string
		next, rest, _ = strings.Cut(rest, ".")
		if label == "sqs" || label == "sqs-fips" {
			return next + partition
		}
		label = next
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

// refuse logs a refused reply (the first, then at most one a
// deflog.Interval, with the number left unlogged) and returns its error.
func (r *Responder) refuse(ctx context.Context, queueURL, responseURL string, request types.Message) error {
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
		r.log.LogAttrs(ctx, slog.LevelWarn, "responder: refusing a reply to a queue Options.AllowReplyTo does not allow",
			slog.String("queue_url", queueURL), slog.String("response_queue_url", responseURL),
			slog.String("request_id", requestID(request)), slog.Int64("refused_unlogged", silent))
	}
	return fmt.Errorf("%w: %s (request from %s)", ErrReplyRefused, responseURL, queueURL)
}
