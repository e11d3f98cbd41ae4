package oteltempq

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	otelglobal "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tempqueues/tempqueues/observe"
	"github.com/tempqueues/tempqueues/requester"
	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// scope is the instrumentation scope of the spans and metrics.
const scope = "github.com/tempqueues/tempqueues/oteltempq"

// Wire names.
const (
	// TraceHeaderAttribute is the SQS system attribute carrying the X-Ray
	// trace header. System attributes do not count against the 10
	// message attributes.
	TraceHeaderAttribute = string(types.MessageSystemAttributeNameAWSTraceHeader)
	// TraceParentAttribute is the message attribute carrying a W3C
	// traceparent when Options.TraceParent is set.
	TraceParentAttribute = "traceparent"
)

// Options configure an Instrumentation. Zero values mean the documented
// defaults.
type Options struct {
	// TracerProvider makes the spans; default the global provider.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics; default the global provider.
	MeterProvider metric.MeterProvider
	// TraceParent also writes the W3C traceparent message attribute on
	// requests and replies, for consumers that read W3C context and
	// servers that drop system attributes. It counts against SQS's 10
	// message attributes: it is written only when the message has room for
	// it beside the attributes the requester or responder adds, checked
	// before any call; otherwise AWSTraceHeader alone carries the context.
	TraceParent bool
}

// Instrumentation traces and measures requesters, responders and SQS
// clients. It is safe for concurrent use; one serves a whole process.
type Instrumentation struct {
	tracer      trace.Tracer
	meter       metric.Meter
	traceParent bool
	tc          propagation.TraceContext

	clientRequests, serverRequests, calls metric.Int64Counter
	clientDuration, serverDuration        metric.Float64Histogram
	lateReplies                           metric.Int64ObservableCounter
}

// New returns an Instrumentation. It fails only when the meter provider
// refuses an instrument.
func New(optFns ...func(*Options)) (*Instrumentation, error) {
	var o Options
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otelglobal.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otelglobal.GetMeterProvider()
	}
	i := &Instrumentation{
		tracer:      o.TracerProvider.Tracer(scope),
		meter:       o.MeterProvider.Meter(scope),
		traceParent: o.TraceParent,
	}
	var errs [6]error
	i.clientRequests, errs[0] = i.meter.Int64Counter("tempqueues.rpc.client.requests",
		metric.WithDescription("Requests made, by outcome: ok, timeout, error."), metric.WithUnit("{request}"))
	i.clientDuration, errs[1] = i.meter.Float64Histogram("tempqueues.rpc.client.duration",
		metric.WithDescription("Time from a request's send to its reply or failure."), metric.WithUnit("s"))
	i.serverRequests, errs[2] = i.meter.Int64Counter("tempqueues.rpc.server.requests",
		metric.WithDescription("Handler runs, by outcome: ok, error, panic."), metric.WithUnit("{request}"))
	i.serverDuration, errs[3] = i.meter.Float64Histogram("tempqueues.rpc.server.duration",
		metric.WithDescription("Handler run time, middleware inside this one included."), metric.WithUnit("s"))
	i.calls, errs[4] = i.meter.Int64Counter("tempqueues.sqs.calls",
		metric.WithDescription("SQS API calls, retries included, by operation."), metric.WithUnit("{call}"))
	i.lateReplies, errs[5] = i.meter.Int64ObservableCounter("tempqueues.rpc.client.late_replies",
		metric.WithDescription("Replies that arrived after their caller gave up (deleted, logged once)."), metric.WithUnit("{reply}"))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return i, nil
}

// Requester is a requester option: it sets Options.Propagator to one
// that starts a producer span for each request, from its send to its
// reply or failure, and writes the span's context into the request's
// AWSTraceHeader (and traceparent, see Options.TraceParent), after any
// propagator set before it; and it joins to Options.Observer (after any
// set before it) an observer of Send events that ends the span and
// records the client request count and duration.
//
//	r, err := requester.New(client, inst.Requester)
func (i *Instrumentation) Requester(o *requester.Options) {
	o.Propagator = chain(o.Propagator, propagator{i})
	o.Observer = observe.Join(o.Observer, observe.Func(func(ctx context.Context, e observe.Event) func(*types.Message, error) {
		if e.Kind != observe.Send {
			return nil
		}
		return i.endRequest(ctx, e.Queue)
	}))
}

// spanKey keys, in the context the propagator returns, the span it
// started, which the observer's done func ends.
type spanKey struct{}

// propagator starts the span of each request and reply, writes its
// context into the message and returns it in the context, under spanKey,
// for the observer of the same message.
type propagator struct{ i *Instrumentation }

func (p propagator) Inject(ctx context.Context, e observe.Event, attrs map[string]types.MessageAttributeValue, sys map[string]types.MessageSystemAttributeValue, room int) context.Context {
	var span trace.Span
	switch req, ok := e.Detail.(*responder.Request); {
	case e.Kind == observe.Send:
		ctx, span = p.i.startRequest(ctx, e.Queue)
	case e.Kind == observe.Reply && ok:
		ctx, span = p.i.startReply(ctx, req)
	default:
		return ctx
	}
	size := 0
	if e.Message != nil {
		size = messageSize(e.Message.Body, attrs)
	}
	p.i.inject(ctx, attrs, sys, room, size)
	return context.WithValue(ctx, spanKey{}, span)
}

// chained runs two propagators in turn, the second with the room the
// first left.
type chained [2]observe.Propagator

func (c chained) Inject(ctx context.Context, e observe.Event, attrs map[string]types.MessageAttributeValue, sys map[string]types.MessageSystemAttributeValue, room int) context.Context {
	n := len(attrs)
	if out := c[0].Inject(ctx, e, attrs, sys, room); out != nil {
		ctx = out
	}
	return c[1].Inject(ctx, e, attrs, sys, room-(len(attrs)-n))
}

// chain returns next after first, or next alone when first is nil.
func chain(first, next observe.Propagator) observe.Propagator {
	if first == nil {
		return next
	}
	return chained{first, next}
}

// startRequest starts the span of a request about to be checked and sent
// to queueURL.
func (i *Instrumentation) startRequest(ctx context.Context, queueURL string) (context.Context, trace.Span) {
	dest := destinationOf(queueURL, false)
	return i.tracer.Start(ctx, "send "+dest.name, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(dest.attributes("send", "send")...))
}

// endRequest returns the function that ends the span the propagator
// started in ctx (none if another propagator took its place) with the
// call's result, and records the client metrics.
func (i *Instrumentation) endRequest(ctx context.Context, queueURL string) func(*types.Message, error) {
	dest := destinationOf(queueURL, false)
	span, _ := ctx.Value(spanKey{}).(trace.Span)
	start := time.Now()
	return func(reply *types.Message, err error) {
		outcome := "ok"
		switch {
		case errors.Is(err, requester.ErrTimeout):
			outcome = "timeout"
		case err != nil:
			outcome = "error"
		}
		if span != nil {
			if reply != nil {
				if v, ok := reply.MessageAttributes[sqsapi.CorrelationIDAttribute]; ok {
					span.SetAttributes(attribute.String("messaging.message.conversation_id", aws.ToString(v.StringValue)))
				}
				i.receipt(span, *reply)
			}
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, outcome)
			}
			span.End()
		}
		attrs := metric.WithAttributes(attribute.String("outcome", outcome), attribute.String("messaging.destination.name", dest.name))
		i.clientRequests.Add(context.Background(), 1, attrs)
		i.clientDuration.Record(context.Background(), time.Since(start).Seconds(), attrs)
	}
}

// receipt marks a reply's arrival with a consumer span "receive
// (temporary)", child of the reply's producer span in the responder,
// linked to the request's span, which in turn gets a link to the reply's
// span. A reply that carries no span context (an untraced responder, a
// server that drops AWSTraceHeader without Options.TraceParent) gets
// neither.
func (i *Instrumentation) receipt(request trace.Span, reply types.Message) {
	sc := i.extract(reply)
	if !sc.IsValid() {
		return
	}
	request.AddLink(trace.Link{SpanContext: sc})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), sc)
	dest := temporary
	_, span := i.tracer.Start(ctx, "receive "+dest.name, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(trace.Link{SpanContext: request.SpanContext()}),
		trace.WithAttributes(append(dest.attributes("receive", "receive"),
			attribute.String("messaging.message.id", aws.ToString(reply.MessageId)))...))
	span.End()
}

// Observe reports r's late replies (Stats().LateReplies) in the
// tempqueues.rpc.client.late_replies counter until the registration is
// unregistered.
func (i *Instrumentation) Observe(r *requester.Requester) (metric.Registration, error) {
	return i.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(i.lateReplies, r.Stats().LateReplies)
		return nil
	}, i.lateReplies)
}

// Responder is a responder option: it puts Middleware first (outermost)
// in Options.Middleware; sets Options.Propagator to one that starts each
// reply's producer span, from the moment the responder has the reply to
// the end of its send, and writes the span's context into the reply's
// AWSTraceHeader (and traceparent, see Options.TraceParent), after any
// propagator set before it; and joins to Options.Observer (after any set
// before it) an observer of Reply events that ends the span when the send
// returns. Streamed messages (Request.Send) get one each.
//
//	r, err := responder.New(client, inst.Responder)
func (i *Instrumentation) Responder(o *responder.Options) {
	o.Middleware = append([]func(responder.Handler) responder.Handler{i.Middleware}, o.Middleware...)
	o.Propagator = chain(o.Propagator, propagator{i})
	o.Observer = observe.Join(o.Observer, observe.Func(func(ctx context.Context, e observe.Event) func(*types.Message, error) {
		span, ok := ctx.Value(spanKey{}).(trace.Span)
		if e.Kind != observe.Reply || !ok {
			return nil
		}
		return func(_ *types.Message, err error) {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, "reply not sent")
			}
			span.End()
		}
	}))
}

// Middleware traces and measures each handler run: a consumer span, child
// of the context the request carries (traceparent if present, else
// AWSTraceHeader), around the handler and the middleware inside this one.
// The replies' spans come from the hook Responder installs beside it.
func (i *Instrumentation) Middleware(next responder.Handler) responder.Handler {
	return responder.HandlerFunc(func(ctx context.Context, req *responder.Request) (reply *responder.Reply, err error) {
		parent := i.extract(req.Message)
		if parent.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
		}
		src := destinationOf(req.QueueURL, false)
		ctx, span := i.tracer.Start(ctx, "process "+src.name, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(append(src.attributes("process", "process"),
				attribute.String("messaging.message.id", aws.ToString(req.Message.MessageId)),
				attribute.String("messaging.message.conversation_id", req.ID),
				attribute.Int("messaging.aws_sqs.receive_count", req.ReceiveCount))...))
		start := time.Now()
		outcome := "panic" // unless the handler returns
		defer func() {
			// Not recovered here: the responder recovers a panic with the
			// stack of its origin, and fails the request.
			if outcome == "panic" {
				span.SetStatus(codes.Error, "handler panicked")
			}
			span.End()
			attrs := metric.WithAttributes(attribute.String("outcome", outcome), attribute.String("messaging.destination.name", src.name))
			i.serverRequests.Add(context.Background(), 1, attrs)
			i.serverDuration.Record(context.Background(), time.Since(start).Seconds(), attrs)
		}()
		reply, err = next.HandleRequest(ctx, req)
		outcome = "ok"
		if err != nil {
			outcome = "error"
			span.RecordError(err)
			span.SetStatus(codes.Error, "handler failed")
		}
		return reply, err
	})
}

// startReply starts the span of a reply to req about to be checked and
// sent: a child of ctx's span (the handler's consumer span; the request's
// span when there is none), linked to the request's span.
func (i *Instrumentation) startReply(ctx context.Context, req *responder.Request) (context.Context, trace.Span) {
	to, _ := req.Attribute(sqsapi.ResponseQueueURLAttribute)
	dest := destinationOf(to, true) // a reply queue is a requester's own
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(append(dest.attributes("send", "send"),
			attribute.String("messaging.message.conversation_id", req.ID))...),
	}
	if request := i.extract(req.Message); request.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: request}))
		if !trace.SpanContextFromContext(ctx).IsValid() {
			// No handler span (a reply replayed from the Store): the
			// reply stays in the request's trace.
			ctx = trace.ContextWithRemoteSpanContext(ctx, request)
		}
	}
	return i.tracer.Start(ctx, "send "+dest.name, opts...)
}

// ownAttributeBytes is room kept in a message's size for the attributes
// the requester or responder adds after their propagator ran (reply queue
// URL, request id, routing name, stream number): well under 1 KiB.
const ownAttributeBytes = 1024

// inject writes ctx's span context: AWSTraceHeader into sys, which
// counts against no limit, and traceparent into attrs when enabled and
// room allows it: room more attributes, and size (the message's bytes so
// far) leaving space for it under SQS's maximum.
func (i *Instrumentation) inject(ctx context.Context, attrs map[string]types.MessageAttributeValue, sys map[string]types.MessageSystemAttributeValue, room, size int) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	sys[TraceHeaderAttribute] = types.MessageSystemAttributeValue{DataType: aws.String("String"), StringValue: aws.String(formatXRay(sc))}
	if i.traceParent && room > 0 {
		carrier := propagation.MapCarrier{}
		i.tc.Inject(ctx, carrier)
		tp := carrier.Get(TraceParentAttribute)
		if add := len(TraceParentAttribute) + len("String") + len(tp); tp != "" && size+add+ownAttributeBytes <= sqsapi.MaxMessageSize {
			attrs[TraceParentAttribute] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(tp)}
		}
	}
}

// extract returns the span context a received message carries: its
// traceparent attribute, else its AWSTraceHeader system attribute.
func (i *Instrumentation) extract(m types.Message) trace.SpanContext {
	if v, ok := m.MessageAttributes[TraceParentAttribute]; ok && v.StringValue != nil {
		ctx := i.tc.Extract(context.Background(), propagation.MapCarrier{TraceParentAttribute: *v.StringValue})
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			return sc
		}
	}
	if h, ok := m.Attributes[TraceHeaderAttribute]; ok {
		if sc, ok := parseXRay(h); ok {
			return sc
		}
	}
	return trace.SpanContext{}
}

// SQS is an *sqs.Client option that counts API calls by operation in
// tempqueues.sqs.calls (each attempt, retries included).
//
//	client := sqs.NewFromConfig(cfg, inst.SQS)
func (i *Instrumentation) SQS(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("tempqueues.oteltempq.Calls",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				i.calls.Add(ctx, 1, metric.WithAttributes(attribute.String("rpc.method", awsmiddleware.GetOperationName(ctx))))
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	})
}

// destination is what a span and a metric say of a queue, following
// OpenTelemetry's messaging conventions: a low-cardinality name for span
// names and metric attributes, and whether the queue is temporary.
type destination struct {
	name      string // the queue's name, or "(temporary)"
	url       string // the queue's URL, virtual part included
	temporary bool
}

// temporaryName stands for every temporary destination in span names and
// metric attributes: reply queues (virtual or not) and host queues are
// one per process or per request, so their names would make a span name
// and a metric series each.
const temporaryName = "(temporary)"

// temporary is the destination of a reply whose queue is not known.
var temporary = destination{name: temporaryName, temporary: true}

// destinationOf describes the queue at u: temporary when reply says it is
// a reply queue, when u is a virtual queue URL ("<host>#<name>"), or when
// the queue's name has the default host queue prefix; otherwise named by
// its queue name, which the application chose.
func destinationOf(u string, reply bool) destination {
	name := queueName(u)
	if reply || strings.Contains(u, "#") || strings.HasPrefix(name, sqsapi.DefaultQueuePrefix) || name == "" {
		return destination{name: temporaryName, url: u, temporary: true}
	}
	return destination{name: name, url: u}
}

// attributes are the span attributes of an operation on d: the full URL
// goes in aws.sqs.queue.url (span attributes may vary per request; span
// names and metric attributes may not).
func (d destination) attributes(opName, opType string) []attribute.KeyValue {
	kv := []attribute.KeyValue{
		attribute.String("messaging.system", "aws_sqs"),
		attribute.String("messaging.operation.name", opName),
		attribute.String("messaging.operation.type", opType),
		attribute.String("messaging.destination.name", d.name),
	}
	if d.temporary {
		kv = append(kv, attribute.Bool("messaging.destination.temporary", true))
	}
	if d.url != "" {
		kv = append(kv, attribute.String("aws.sqs.queue.url", d.url))
	}
	return kv
}

// messageSize is the size SQS counts against MaximumMessageSize: the body
// plus each message attribute's name, data type and value. This module is
// versioned apart from the core, so it keeps its own copy of the core's
// internal rule (a test holds the two equal) rather than import it.
func messageSize(body *string, attrs map[string]types.MessageAttributeValue) int {
	n := 0
	if body != nil {
		n = len(*body)
	}
	for name, v := range attrs {
		n += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// queueName returns the last part of a queue URL, the queue's name; for a
// virtual queue URL "<host>#<name>", the host queue's name.
func queueName(u string) string {
	host, _, _ := strings.Cut(u, "#")
	if p, err := url.Parse(host); err == nil && p.Path != "" {
		host = p.Path
	}
	return host[strings.LastIndex(host, "/")+1:]
}
