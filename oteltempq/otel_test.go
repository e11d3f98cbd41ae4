package oteltempq_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tempqueues/tempqueues/internal/testkit/sqstestenv"
	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/oteltempq"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// setup returns an Instrumentation recording into memory.
func setup(t *testing.T, traceParent bool) (*oteltempq.Instrumentation, *tracetest.InMemoryExporter, *sdkmetric.ManualReader) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	inst, err := oteltempq.New(func(o *oteltempq.Options) {
		o.TracerProvider, o.MeterProvider, o.TraceParent = tp, mp, traceParent
	})
	if err != nil {
		t.Fatal(err)
	}
	return inst, exp, reader
}

func createQueue(t *testing.T, client *sqs.Client, base string) string {
	t.Helper()
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(sqstestenv.QueueName(t, base))})
	if err != nil {
		t.Fatal(err)
	}
	u := aws.ToString(out.QueueUrl)
	t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &u}) })
	return u
}

// span is what the checks need of a finished span, in a form a child
// process can write as JSON.
type span struct {
	Name, Kind, Trace, ID, Parent string
	ParentRemote                  bool
	Attrs                         map[string]string
	Links                         []string // span ids
	Start, End                    time.Time
}

func spans(stubs tracetest.SpanStubs) []span {
	out := make([]span, len(stubs))
	for i, s := range stubs {
		out[i] = span{Name: s.Name, Kind: s.SpanKind.String(), Trace: s.SpanContext.TraceID().String(), ID: s.SpanContext.SpanID().String(),
			ParentRemote: s.Parent.IsRemote(), Start: s.StartTime, End: s.EndTime, Attrs: map[string]string{}}
		for _, kv := range s.Attributes {
			out[i].Attrs[string(kv.Key)] = kv.Value.Emit()
		}
		if s.Parent.IsValid() {
			out[i].Parent = s.Parent.SpanID().String()
		}
		for _, l := range s.Links {
			out[i].Links = append(out[i].Links, l.SpanContext.SpanID().String())
		}
	}
	return out
}

// checkRoundTrip checks the spans of one round trip: the request's
// producer span, the handler's consumer span as its child, the reply's
// producer span as the consumer's child with a link to the request; and
// the reply's arrival at the requester, a consumer span child of the
// reply's span, linked both ways with the request's. It returns the
// reply's span.
func checkRoundTrip(t *testing.T, client, server []span) span {
	t.Helper()
	var req, cons, reply, receipt []span
	for _, s := range client {
		switch {
		case s.Kind == "producer" && s.Parent == "": // a reply's span has the handler's as parent
			req = append(req, s)
		case s.Kind == "consumer" && strings.HasPrefix(s.Name, "receive "):
			receipt = append(receipt, s)
		}
	}
	for _, s := range server {
		if s.Kind == "consumer" && strings.HasPrefix(s.Name, "process ") {
			cons = append(cons, s)
		}
	}
	if len(req) != 1 || len(cons) != 1 {
		t.Fatalf("%d request and %d consumer spans, want 1 each: %+v %+v", len(req), len(cons), client, server)
	}
	for _, s := range server {
		if s.Kind == "producer" && s.Parent == cons[0].ID {
			reply = append(reply, s)
		}
	}
	if len(reply) != 1 || len(receipt) != 1 {
		t.Fatalf("%d reply spans and %d receipt spans, want 1 each: %+v %+v", len(reply), len(receipt), client, server)
	}
	checkNames(t, req[0], cons[0], reply[0], receipt[0])
	tid := req[0].Trace
	if cons[0].Trace != tid || reply[0].Trace != tid || receipt[0].Trace != tid {
		t.Errorf("trace ids: request %v, handler %v, reply %v, receipt %v: want one", tid, cons[0].Trace, reply[0].Trace, receipt[0].Trace)
	}
	if cons[0].Parent != req[0].ID || !cons[0].ParentRemote {
		t.Errorf("handler span's parent %v, want the request's span %v (remote)", cons[0].Parent, req[0].ID)
	}
	if len(reply[0].Links) != 1 || reply[0].Links[0] != req[0].ID {
		t.Errorf("reply span links %v, want one to the request's span", reply[0].Links)
	}
	if receipt[0].Parent != reply[0].ID || !receipt[0].ParentRemote || len(receipt[0].Links) != 1 || receipt[0].Links[0] != req[0].ID {
		t.Errorf("receipt span: parent %v (remote %v), links %v; want the reply's span %v (remote), a link to the request's %v",
			receipt[0].Parent, receipt[0].ParentRemote, receipt[0].Links, reply[0].ID, req[0].ID)
	}
	if len(req[0].Links) != 1 || req[0].Links[0] != reply[0].ID {
		t.Errorf("request span links %v, want one to the reply's span %v", req[0].Links, reply[0].ID)
	}
	return reply[0]
}

// checkNames checks the spans' names and destinations against
// OpenTelemetry's messaging conventions: "<operation> <destination>",
// where the destination of a reply, a temporary queue of one requester,
// is "(temporary)" with messaging.destination.temporary set, so that a
// span name stays the same from one request to the next.
func checkNames(t *testing.T, req, cons, reply, receipt span) {
	t.Helper()
	queue := req.Attrs["messaging.destination.name"]
	if queue == "" || strings.Contains(queue, "#") || strings.HasPrefix(queue, sqsapi.DefaultQueuePrefix) {
		t.Errorf("request span's destination %q, want the request queue's name", queue)
	}
	for _, c := range []struct {
		s         span
		name, op  string
		temporary bool
	}{
		{req, "send " + queue, "send", false},
		{cons, "process " + queue, "process", false},
		{reply, "send (temporary)", "send", true},
		{receipt, "receive (temporary)", "receive", true},
	} {
		if c.s.Name != c.name {
			t.Errorf("span %q, want %q", c.s.Name, c.name)
		}
		if got := c.s.Attrs["messaging.operation.name"]; got != c.op {
			t.Errorf("span %q: messaging.operation.name %q, want %q", c.s.Name, got, c.op)
		}
		if got, want := c.s.Attrs["messaging.destination.temporary"], map[bool]string{true: "true"}[c.temporary]; got != want {
			t.Errorf("span %q: messaging.destination.temporary %q, want %q", c.s.Name, got, want)
		}
		if dest := c.s.Attrs["messaging.destination.name"]; strings.Contains(dest, "-") && c.temporary {
			t.Errorf("span %q: messaging.destination.name %q names one requester's queue", c.s.Name, dest)
		}
	}
	if u := reply.Attrs["aws.sqs.queue.url"]; !strings.Contains(u, sqsapi.DefaultQueuePrefix) {
		t.Errorf("reply span's aws.sqs.queue.url %q, want the requester's reply queue", u)
	}
}

// checkReplyContext checks that the reply m the requester got carries the
// context of the reply's span: in AWSTraceHeader, where the server keeps
// it, and in traceparent when so configured.
func checkReplyContext(t *testing.T, m *types.Message, reply span, header, traceParent bool) {
	t.Helper()
	if header {
		h := m.Attributes[oteltempq.TraceHeaderAttribute]
		if want := "Root=1-" + reply.Trace[:8] + "-" + reply.Trace[8:] + ";Parent=" + reply.ID + ";Sampled=1"; h != want {
			t.Errorf("reply's AWSTraceHeader %q, want %q", h, want)
		}
	}
	tp := aws.ToString(m.MessageAttributes[oteltempq.TraceParentAttribute].StringValue)
	if want := "00-" + reply.Trace + "-" + reply.ID + "-01"; traceParent && tp != want {
		t.Errorf("reply's traceparent %q, want %q", tp, want)
	}
}

// sendRecorder is a responder's client that records its reply sends: when
// each call started and ended, and the AWSTraceHeader of its entries.
type sendRecorder struct {
	*sqs.Client
	mu    sync.Mutex
	calls []sendCall
}

type sendCall struct {
	start, end time.Time
	headers    []string
}

func (c *sendRecorder) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	call := sendCall{start: time.Now()}
	out, err := c.Client.SendMessageBatch(ctx, in, optFns...)
	call.end = time.Now()
	for _, e := range in.Entries {
		call.headers = append(call.headers, aws.ToString(e.MessageSystemAttributes[oteltempq.TraceHeaderAttribute].StringValue))
	}
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.mu.Unlock()
	return out, err
}

// check finds the call that sent the message whose AWSTraceHeader names
// span s, and checks that s covers that call.
func (c *sendRecorder) check(t *testing.T, s span) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	want := "Root=1-" + s.Trace[:8] + "-" + s.Trace[8:] + ";Parent=" + s.ID + ";Sampled=1"
	for _, call := range c.calls {
		if slices.Contains(call.headers, want) {
			if s.Start.After(call.start) || s.End.Before(call.end) {
				t.Errorf("span %s from %v to %v does not cover its send from %v to %v", s.Name, s.Start, s.End, call.start, call.end)
			}
			return
		}
	}
	t.Errorf("no send carried AWSTraceHeader %q: %+v", want, c.calls)
}

func TestRoundTripIsOneTrace(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		// fauxqs drops AWSTraceHeader: there only traceparent carries it.
		for _, traceParent := range []bool{false, true} {
			if b.Name == "fauxqs" && !traceParent {
				continue
			}
			t.Run(fmt.Sprint("traceparent=", traceParent), func(t *testing.T) {
				inst, exp, reader := setup(t, traceParent)
				client, _ := b.Client(t)
				client = sqs.New(client.Options(), inst.SQS)
				q := createQueue(t, client, "otel")
				rec := &sendRecorder{Client: client}
				resp, err := responder.New(rec, inst.Responder, func(o *responder.Options) { o.PollWaitTime = time.Second })
				if err != nil {
					t.Fatal(err)
				}
				served := make(chan error, 1)
				go func() {
					served <- resp.Serve(context.Background(), q, responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
						if !trace.SpanContextFromContext(ctx).IsValid() {
							return nil, fmt.Errorf("handler context has no span")
						}
						return &responder.Reply{Body: "re: " + req.Body()}, nil
					}))
				}()
				rq, err := requester.New(client, inst.Requester, func(o *requester.Options) { o.DisableSweeping = true })
				if err != nil {
					t.Fatal(err)
				}
				reg, err := inst.Observe(rq)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = reg.Unregister() }()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				m, err := rq.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("hi")})
				if err != nil || aws.ToString(m.Body) != "re: hi" {
					t.Fatalf("round trip: %v %v", m, err)
				}
				if _, ok := m.MessageAttributes[oteltempq.TraceParentAttribute]; ok != traceParent {
					t.Errorf("reply carries traceparent: %v, want %v", ok, traceParent)
				}
				if err := resp.Shutdown(ctx); err != nil {
					t.Fatal(err)
				}
				<-served
				if err := rq.Close(ctx); err != nil {
					t.Fatal(err)
				}
				all := spans(exp.GetSpans())
				reply := checkRoundTrip(t, all, all)
				checkReplyContext(t, m, reply, b.Name != "fauxqs", traceParent)
				rec.check(t, reply)

				var rm metricdata.ResourceMetrics
				if err := reader.Collect(context.Background(), &rm); err != nil {
					t.Fatal(err)
				}
				sums := map[string]int64{}
				for _, sm := range rm.ScopeMetrics {
					for _, mt := range sm.Metrics {
						switch d := mt.Data.(type) {
						case metricdata.Sum[int64]:
							for _, p := range d.DataPoints {
								sums[mt.Name] += p.Value
							}
						case metricdata.Histogram[float64]:
							for _, p := range d.DataPoints {
								sums[mt.Name] += int64(p.Count)
							}
						}
					}
				}
				for name, want := range map[string]int64{
					"tempqueues.rpc.client.requests": 1, "tempqueues.rpc.client.duration": 1,
					"tempqueues.rpc.server.requests": 1, "tempqueues.rpc.server.duration": 1,
					"tempqueues.rpc.client.late_replies": 0,
				} {
					if sums[name] != want {
						t.Errorf("%s = %d, want %d", name, sums[name], want)
					}
				}
				if sums["tempqueues.sqs.calls"] < 5 {
					t.Errorf("tempqueues.sqs.calls = %d, want the round trip's calls", sums["tempqueues.sqs.calls"])
				}
			})
		}
	})
}

// A request whose room (what the requester leaves of SQS's 10
// attributes) or size leaves no place for traceparent goes out without
// it, and with its AWSTraceHeader, which counts against no limit: never
// an error for tracing. The size keeps room for the bytes of the
// requester's own attributes.
func TestTraceParentOnlyWhenThereIsRoom(t *testing.T) {
	inst, _, _ := setup(t, true)
	var o requester.Options
	inst.Requester(&o)
	for _, tc := range []struct {
		room, body int
		want       bool
	}{{1, 1, true}, {0, 1, false}, {7, sqsapi.MaxMessageSize - 2048, true}, {7, sqsapi.MaxMessageSize - 1024, false}} {
		body := aws.String(strings.Repeat("x", tc.body))
		attrs := map[string]types.MessageAttributeValue{}
		sys := map[string]types.MessageSystemAttributeValue{}
		e := observe.Event{Kind: observe.Send, Queue: "https://sqs.eu-west-1.amazonaws.com/1/q", Message: &types.Message{Body: body}}
		ctx := o.Propagator.Inject(context.Background(), e, attrs, sys, tc.room)
		o.Observer.Observe(ctx, e)(nil, nil)
		if _, ok := attrs[oteltempq.TraceParentAttribute]; ok != tc.want {
			t.Errorf("room %d, body of %d bytes: traceparent %v, want %v", tc.room, tc.body, ok, tc.want)
		}
		if _, ok := sys[oteltempq.TraceHeaderAttribute]; !ok {
			t.Errorf("room %d, body of %d bytes: no AWSTraceHeader", tc.room, tc.body)
		}
	}
}

// Each message of a reply stream carries the context of its own reply
// span, a child of the handler's span, which covers its send.
func TestStreamedRepliesCarryContext(t *testing.T) {
	sqstestenv.Each(t, func(t *testing.T, b *sqstestenv.Backend) {
		header := b.Name != "fauxqs" // fauxqs drops AWSTraceHeader
		inst, exp, _ := setup(t, !header)
		client, _ := b.Client(t)
		q := createQueue(t, client, "otelstream")
		rec := &sendRecorder{Client: client}
		resp, err := responder.New(rec, inst.Responder, func(o *responder.Options) { o.PollWaitTime = time.Second })
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() {
			served <- resp.Serve(context.Background(), q, responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
				for i := range 2 {
					if err := req.Send(ctx, &responder.Reply{Body: fmt.Sprint("part ", i)}); err != nil {
						return nil, err
					}
				}
				return &responder.Reply{Body: "last"}, nil
			}))
		}()
		rq, err := requester.New(client, inst.Requester, func(o *requester.Options) { o.DisableSweeping = true })
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := rq.SendMessageAndStream(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("go")})
		if err != nil {
			t.Fatal(err)
		}
		var got []*types.Message
		for m, err := range s.All(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m)
		}
		if err := resp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		<-served
		if err := rq.Close(ctx); err != nil {
			t.Fatal(err)
		}
		all := spans(exp.GetSpans())
		var cons []span
		for _, sp := range all {
			if sp.Kind == "consumer" && strings.HasPrefix(sp.Name, "process ") {
				cons = append(cons, sp)
			}
		}
		if len(cons) != 1 || len(got) != 3 {
			t.Fatalf("%d handler spans, %d messages; want 1 and 3", len(cons), len(got))
		}
		seen := map[string]bool{}
		for _, m := range got {
			var reply span
			for _, sp := range all {
				if sp.Kind == "producer" && sp.Parent == cons[0].ID && (strings.Contains(m.Attributes[oteltempq.TraceHeaderAttribute], sp.ID) ||
					strings.Contains(aws.ToString(m.MessageAttributes[oteltempq.TraceParentAttribute].StringValue), sp.ID)) {
					reply = sp
				}
			}
			if reply.ID == "" || seen[reply.ID] {
				t.Errorf("message %q names no reply span of its own: %v %v", aws.ToString(m.Body), m.Attributes, m.MessageAttributes)
				continue
			}
			seen[reply.ID] = true
			checkReplyContext(t, m, reply, header, !header)
			rec.check(t, reply)
		}
	})
}

// A reply replayed from the Store, without a handler run, has its span in
// the trace of the request it answers, and carries its context.
func TestReplayedReplyStaysInTheRequestsTrace(t *testing.T) {
	b := sqstestenv.SQSTest(t)
	inst, exp, _ := setup(t, false)
	client, _ := b.Client(t)
	q := createQueue(t, client, "otelreplay")
	resp, err := responder.New(client, inst.Responder, func(o *responder.Options) {
		o.PollWaitTime = time.Second
		o.Store = responder.NewMemoryStore()
	})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- resp.Serve(context.Background(), q, responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
			return &responder.Reply{Body: "answer"}, nil
		}))
	}()
	rq, err := requester.New(client, inst.Requester, func(o *requester.Options) { o.DisableSweeping = true })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var last *types.Message
	for range 2 {
		m, err := rq.SendMessageAndGetResponse(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("q"),
			MessageAttributes: map[string]types.MessageAttributeValue{sqsapi.RequestIDAttribute: {DataType: aws.String("String"), StringValue: aws.String("same")}}})
		if err != nil || aws.ToString(m.Body) != "answer" {
			t.Fatalf("round trip: %v %v", m, err)
		}
		last = m
	}
	if err := resp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-served
	if err := rq.Close(ctx); err != nil {
		t.Fatal(err)
	}
	all := spans(exp.GetSpans())
	var reqs []span
	for _, sp := range all {
		if sp.Kind == "producer" && sp.Parent == "" {
			reqs = append(reqs, sp)
		}
	}
	if len(reqs) != 2 {
		t.Fatalf("%d request spans, want 2: %+v", len(reqs), all)
	}
	second := reqs[1]
	if reqs[0].Start.After(second.Start) {
		second = reqs[0]
	}
	var replay []span
	for _, sp := range all {
		if sp.Kind == "producer" && sp.Parent == second.ID {
			replay = append(replay, sp)
		}
	}
	if len(replay) != 1 || replay[0].Trace != second.Trace || !replay[0].ParentRemote || len(replay[0].Links) != 1 || replay[0].Links[0] != second.ID {
		t.Fatalf("replayed reply's spans %+v, want one child of the second request's span %v, linked to it", replay, second.ID)
	}
	checkReplyContext(t, last, replay[0], true, false)
}
