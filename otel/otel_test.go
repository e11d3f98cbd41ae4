package otel_test

import (
	"context"
	"fmt"
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

	"github.com/tempqueues/tempqueues/internal/sqstestenv"
	"github.com/tempqueues/tempqueues/otel"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// setup returns an Instrumentation recording into memory.
func setup(t *testing.T, traceParent bool) (*otel.Instrumentation, *tracetest.InMemoryExporter, *sdkmetric.ManualReader) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	inst, err := otel.New(func(o *otel.Options) {
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
	Links                         []string // span ids
}

func spans(stubs tracetest.SpanStubs) []span {
	out := make([]span, len(stubs))
	for i, s := range stubs {
		out[i] = span{Name: s.Name, Kind: s.SpanKind.String(), Trace: s.SpanContext.TraceID().String(), ID: s.SpanContext.SpanID().String(),
			ParentRemote: s.Parent.IsRemote()}
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
// producer span, the handler's consumer span as its child, and the reply's
// producer span as the consumer's child with a link to the request.
func checkRoundTrip(t *testing.T, client, server []span) {
	t.Helper()
	var req, cons, reply []span
	for _, s := range client {
		if s.Kind == "producer" && s.Parent == "" { // a reply's span has the handler's as parent
			req = append(req, s)
		}
	}
	for _, s := range server {
		if s.Kind == "consumer" {
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
	if len(reply) != 1 {
		t.Fatalf("%d reply spans, want 1", len(reply))
	}
	tid := req[0].Trace
	if cons[0].Trace != tid || reply[0].Trace != tid {
		t.Errorf("trace ids: request %v, handler %v, reply %v: want one", tid, cons[0].Trace, reply[0].Trace)
	}
	if cons[0].Parent != req[0].ID || !cons[0].ParentRemote {
		t.Errorf("handler span's parent %v, want the request's span %v (remote)", cons[0].Parent, req[0].ID)
	}
	if len(reply[0].Links) != 1 || reply[0].Links[0] != req[0].ID {
		t.Errorf("reply span links %v, want one to the request's span", reply[0].Links)
	}
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
				resp, err := responder.New(client, inst.Responder, func(o *responder.Options) { o.PollWaitTime = time.Second })
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
				if _, ok := m.MessageAttributes[otel.TraceParentAttribute]; ok != traceParent {
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
				checkRoundTrip(t, all, all)

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

// A request whose attributes leave no room for traceparent goes out
// without it, and with its AWSTraceHeader: never an error for tracing.
func TestTraceParentOnlyWhenThereIsRoom(t *testing.T) {
	inst, _, _ := setup(t, true)
	var o requester.Options
	inst.Requester(&o)
	for _, tc := range []struct {
		own  int
		want bool
	}{{7, true}, {8, false}} {
		in := &sqs.SendMessageInput{QueueUrl: aws.String("https://sqs.eu-west-1.amazonaws.com/1/q"), MessageBody: aws.String("x"),
			MessageAttributes: map[string]types.MessageAttributeValue{}, MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{}}
		for i := range tc.own {
			in.MessageAttributes[fmt.Sprint("a", i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
		}
		done := o.OnSend(context.Background(), in)
		done(nil, nil)
		if _, ok := in.MessageAttributes[otel.TraceParentAttribute]; ok != tc.want {
			t.Errorf("%d own attributes: traceparent %v, want %v", tc.own, ok, tc.want)
		}
		if len(in.MessageAttributes)+2 > sqsapi.MaxMessageAttributes {
			t.Errorf("%d own attributes: %d with the requester's two", tc.own, len(in.MessageAttributes)+2)
		}
		if _, ok := in.MessageSystemAttributes[otel.TraceHeaderAttribute]; !ok {
			t.Errorf("%d own attributes: no AWSTraceHeader", tc.own)
		}
	}
}
