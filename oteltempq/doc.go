// Package oteltempq traces and measures tempqueues with OpenTelemetry: one trace
// from a requester's send, through the responder's handler, to the reply,
// across processes; and metrics for requests, their latency, late replies
// and SQS API calls by operation.
//
//	inst, err := oteltempq.New() // the global tracer and meter providers
//	client := sqs.NewFromConfig(cfg, inst.SQS)             // API calls
//	req, err := requester.New(client, inst.Requester)      // producer spans
//	resp, err := responder.New(client, inst.Responder)     // consumer spans
//
// A request carries its span context in the AWSTraceHeader system
// attribute, in X-Ray's header format, which does not count against SQS's
// 10 message attributes and which Lambda, X-Ray and AWS's own SDK
// instrumentation read; with Options.TraceParent also in a W3C traceparent
// message attribute, when there is room for it (an attribute, and its
// bytes within SQS's message size). A request's producer span starts in
// the requester's Options.Propagator, which writes its context into the
// request, and ends in its Options.Observer when the call does. The
// responder's middleware starts the consumer span as a child of that
// context; its propagator (responder.Options.Propagator) starts each
// reply's producer span as the consumer span's child, linked to the
// request's span, and puts its context on the reply the same way; its
// observer of Reply events ends the span when the reply's send call
// returns. The requester marks the reply's arrival with a consumer span,
// child of the reply's span.
//
// The package lives in its own module, github.com/tempqueues/tempqueues/oteltempq,
// so that OpenTelemetry is not a dependency of the rest.
package oteltempq
