// Package faultproxy is a test helper: an HTTP proxy on 127.0.0.1 in front
// of an SQS-compatible server (AWS JSON 1.0 protocol) that injects faults
// into a chosen share of calls, by operation, from a seeded random source:
// throttling, HTTP 500s, dropped responses and delays. It counts what it
// injected.
//
// sqstest injects faults too (sqstest.Fault), but only into its own server,
// before a call runs, and for every call or the next N. The proxy works in
// front of any server (fauxqs has no fault injection), over the real HTTP
// path, on a random share of calls, and can drop a response after the
// server ran the call: the client sees a connection reset, the server's
// state changed (a message sent, a receive's messages hidden).
package faultproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Kind is a kind of fault.
type Kind int

const (
	// Throttle answers HTTP 400 with the JSON protocol's
	// ThrottlingException (x-amzn-query-error: ThrottlingException;Sender),
	// which the SDK classifies as throttling, without forwarding the call.
	Throttle Kind = iota + 1
	// ServerError answers HTTP 500 InternalError without forwarding the
	// call; the SDK retries it as transient.
	ServerError
	// Drop forwards the call, waits for the server's response and then
	// resets the client's connection instead of answering: the call ran,
	// the client gets a connection error.
	Drop
	// Delay waits Rule.Delay before forwarding the call.
	Delay
)

func (k Kind) String() string {
	switch k {
	case Throttle:
		return "throttle"
	case ServerError:
		return "500"
	case Drop:
		return "drop"
	case Delay:
		return "delay"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Rule injects Kind into Share of the calls of Op.
type Rule struct {
	Op    string  // operation, e.g. "SendMessageBatch"; "" matches all
	Kind  Kind    // the fault
	Share float64 // fraction of matching calls, 0..1
	Delay time.Duration
}

// Proxy is a running fault-injecting proxy. Its methods are safe for
// concurrent use.
type Proxy struct {
	target string
	srv    *http.Server
	ln     net.Listener
	client *http.Client
	done   chan struct{}

	mu       sync.Mutex
	rules    []Rule
	rng      *rand.Rand
	calls    map[string]int64
	injected map[string]map[Kind]int64
}

// Start starts a proxy to target (a base URL such as fauxqs's) with rules,
// drawing from a random source seeded with seed so that a sequence of calls
// meets the same faults on every run. It is closed when the test ends.
func Start(tb testing.TB, target string, seed uint64, rules ...Rule) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("faultproxy: %v", err)
	}
	p := &Proxy{
		target: strings.TrimRight(target, "/"),
		ln:     ln,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}},
		done:   make(chan struct{}),
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		calls:  make(map[string]int64),

		injected: make(map[string]map[Kind]int64),
	}
	p.SetRules(rules...)
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(ln)
	}()
	tb.Cleanup(p.Close)
	return p
}

// URL is the proxy's base URL, to use as the client's endpoint.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// SetRules replaces the rules; none means a plain proxy.
func (p *Proxy) SetRules(rules ...Rule) {
	p.mu.Lock()
	p.rules = append([]Rule(nil), rules...)
	p.mu.Unlock()
}

// Calls returns the number of calls of op the proxy received ("" for all).
func (p *Proxy) Calls(op string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if op != "" {
		return p.calls[op]
	}
	var n int64
	for _, c := range p.calls {
		n += c
	}
	return n
}

// Injected returns the number of faults of kind injected into calls of op
// ("" for all operations).
func (p *Proxy) Injected(op string, kind Kind) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for o, byKind := range p.injected {
		if op == "" || o == op {
			n += byKind[kind]
		}
	}
	return n
}

// Summary describes the calls and the injected faults by operation, for
// test logs.
func (p *Proxy) Summary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for op, n := range p.calls {
		fmt.Fprintf(&b, "%s: %d calls", op, n)
		for _, k := range []Kind{Throttle, ServerError, Drop, Delay} {
			if c := p.injected[op][k]; c > 0 {
				fmt.Fprintf(&b, ", %d %v", c, k)
			}
		}
		b.WriteString("; ")
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// Close stops the proxy, ending calls in flight.
func (p *Proxy) Close() {
	_ = p.srv.Close()
	<-p.done
	p.client.CloseIdleConnections()
}

// decide counts a call of op and draws the fault it meets, if any: the
// first rule that matches and whose draw falls within its share.
func (p *Proxy) decide(op string) (Rule, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[op]++
	for _, r := range p.rules {
		if r.Op != "" && r.Op != op {
			continue
		}
		if p.rng.Float64() >= r.Share {
			continue
		}
		if p.injected[op] == nil {
			p.injected[op] = make(map[Kind]int64)
		}
		p.injected[op][r.Kind]++
		return r, true
	}
	return Rule{}, false
}

// ServeHTTP forwards a call to the target, or fails it as a rule says.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	rule, faulty := p.decide(op)
	if faulty {
		switch rule.Kind {
		case Throttle:
			writeError(w, http.StatusBadRequest, "ThrottlingException", "Sender", "Rate exceeded")
			return
		case ServerError:
			writeError(w, http.StatusInternalServerError, "InternalError", "Receiver", "We encountered an internal error. Please try again.")
			return
		case Delay:
			t := time.NewTimer(rule.Delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
	}
	status, header, body, err := p.forward(r)
	if err != nil {
		http.Error(w, "faultproxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	if faulty && rule.Kind == Drop {
		reset(w)
		return
	}
	for k, vs := range header {
		w.Header()[k] = vs
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// forward makes the call on the target and reads its whole response.
func (p *Proxy) forward(r *http.Request) (int, http.Header, []byte, error) {
	in, err := io.ReadAll(r.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(in))
	if err != nil {
		return 0, nil, nil, err
	}
	out.Header = r.Header.Clone()
	out.Host = ""
	resp, err := p.client.Do(out)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	resp.Header.Del("Content-Length")
	return resp.StatusCode, resp.Header, body, nil
}

// reset closes the client's connection with a TCP reset (SO_LINGER 0), as
// a dying load balancer or a broken network would, instead of answering.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faultproxy: the response writer cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// writeError writes an error as SQS does in the JSON protocol: the shape in
// __type and, SQS being query compatible, the legacy code and fault in
// x-amzn-query-error.
func writeError(w http.ResponseWriter, status int, code, fault, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("x-amzn-query-error", code+";"+fault)
	h.Set("x-amzn-RequestId", fmt.Sprintf("faultproxy-%d", time.Now().UnixNano()))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{"com.amazonaws.sqs#" + code, msg})
}
