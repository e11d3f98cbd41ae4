// Package sqsclient prepares the *sqs.Client a program gives tempqueues:
// BufferRequestBodies, the client option that keeps the SDK from losing
// responses (every *sqs.Client given to tempqueues should have it), and
// CallCounter, an SDK middleware that counts API calls and the requests
// SQS bills for them (one per started 64 KiB of message payload).
//
//	counter := new(sqsclient.CallCounter)
//	client := sqs.NewFromConfig(cfg, sqsclient.BufferRequestBodies, sqs.WithAPIOptions(counter.Register))
//
// The interfaces, wire constants, limits and errors that every tempqueues
// package shares are in package sqsapi.
package sqsclient
