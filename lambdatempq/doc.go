// Package lambdatempq serves tempqueues responders and dead-letter replay from
// AWS Lambda functions whose event source is an SQS queue.
//
// A Responder answers the requests of an events.SQSEvent with the same
// responder.Handler, middleware and idempotency Store a responder.Serve
// loop uses (through responder.Process): replies go to each request's
// ResponseQueueUrl, virtual ("<host>#<name>", Go or Java requester) or
// plain, where responder.Options.AllowReplyTo allows (by default only
// requesters' host queues next to the request queue; a request naming
// another queue is done, unanswered), and a request that failed, panicked, or is held by another
// consumer in the Store is reported in events.SQSEventResponse's
// BatchItemFailures, so that only it is retried. The function's event
// source mapping must enable ReportBatchItemFailures
// (FunctionResponseTypes: [ReportBatchItemFailures]); without it Lambda
// ignores the response and retries the whole batch after any error.
//
// A Redrive runs the dead-letter replay of package redrive (attempt
// counting, full-jitter delays, delays beyond 900 s, parking) on the
// batches of a function whose event source is the dead-letter queue
// (through redrive.Process). It also continues the count that AWS's
// serverless DLQ-replay application writes in the sqs-dlq-replay-nb
// message attribute, so a queue can switch from it without resetting its
// messages' attempts.
//
// Both are safe for concurrent use and meant to be built once per
// execution environment (outside the handler) and reused by every
// invocation. Event builds the event the event source mapping would
// deliver from received messages, to run functions locally and in tests.
//
// The package lives in its own module, github.com/tempqueues/tempqueues/lambdatempq,
// so that github.com/aws/aws-lambda-go is not a dependency of the rest.
package lambdatempq
