// Package responder is the server side of request/response over Amazon SQS:
// it answers requests sent by a tempqueues requester or by AWS's Java
// Temporary Queue Client, and speaks the Java client's wire format.
//
// A request carries the String message attribute ResponseQueueUrl. When it
// names a virtual queue, "<host-queue-url>#<name>", the reply is sent to the
// host queue with the attribute __AmazonSQSVirtualQueuesClient.QueueName set
// to <name>, which the requester's poller routes to the waiting caller; any
// other URL gets a plain send. Replies also carry TempQueues.CorrelationId,
// a copy of the request's TempQueues.RequestId (or of its MessageId), which
// a Java peer ignores.
//
// # Where replies may go
//
// Whoever may send to the request queue chooses ResponseQueueUrl, so the
// responder checks it before anything else: by default a reply goes only
// to a queue in the request queue's own account and region (off AWS, the
// same scheme, host and account) whose name starts with
// sqsapi.DefaultQueuePrefix, that is, to the host queue of a Go or Java
// requester with the default prefix. Options.AllowReplyTo adds queue-name
// prefixes (a requester's custom Prefix) and queue-URL prefixes (other
// accounts or regions). A request naming any other queue is deleted
// without running its handler, counted in Stats.Dropped (reason
// "refused" for the Observer) and logged at Warn (at most once a minute); SendResponseMessage returns
// ErrReplyRefused for it. Grant the responder's role sqs:SendMessage only
// on the same queues (docs/iam.md).
//
// Use SendResponseMessage from a receive loop of your own, or let Serve run
// the loop:
//
//	r, err := responder.New(sqsClient, func(o *responder.Options) {
//		o.MaxConcurrency = 32
//		o.Store = responder.NewMemoryStore() // deduplicate redeliveries
//	})
//	...
//	err = r.Serve(ctx, requestQueueURL, responder.HandlerFunc(
//		func(ctx context.Context, req *responder.Request) (*responder.Reply, error) {
//			return &responder.Reply{Body: "hello " + req.Body()}, nil
//		}))
//
// Options.Middleware wraps the handler (logging, metrics, authorization,
// tracing: the oteltempq module's middleware), the first function outermost;
// Options.Observer is told what the responder does (package observe): it
// sees each reply before its checks and after its send (the oteltempq module's
// reply spans) and may add an AWSTraceHeader, and hears of each handler
// run, dropped request and release.
// Process handles one request received by other means (a Lambda SQS event:
// the lambdatempq module) exactly as Serve handles one, and leaves the delete
// or release to its caller.
//
// # Delivery semantics
//
// SQS delivers at least once, and so does Serve: a request is deleted only
// after its handler succeeded and its reply was sent. A handler may
// therefore see a request again after a crash, a failed delete, a lost
// visibility extension or an SQS duplicate. With Options.Store set, a
// request id that was answered before is answered again from the stored
// reply without running the handler, and one being handled elsewhere is
// put back rather than run twice; the built-in MemoryStore covers one
// process, and a shared store (Redis with a lock) covers a fleet. Without a
// Store, handlers must be idempotent. A requester may thus receive a reply
// twice; the tempqueues requester drops the second as an orphan.
//
// While a handler runs, one goroutine per Serve extends the visibility of
// every in-flight request (visibility extension) in ChangeMessageVisibilityBatch
// calls, so a long handler keeps its request, and a crashed process's
// requests reappear within one VisibilityTimeout. SQS caps a message's
// visibility at 12 hours after receipt: a handler still running then is
// cancelled with the cause ErrVisibilityLimit.
//
// # Deadlines
//
// A tempqueues requester stamps each request with its caller's deadline
// (sqsapi.DeadlineAttribute, Unix milliseconds) when the message has room
// for it. A request whose deadline has passed, by more than one second
// of allowed clock skew, when it reaches Serve or Process is deleted
// without running the handler (nobody waits for its reply), counted in
// Stats.Dropped (the Observer hears a Dropped event, reason "expired")
// and logged. Any other runs its handler, besides Options.HandlerTimeout,
// under the caller's deadline less the time its reply needs to travel
// (two SQS calls as the responder measures them, at most half the time
// left), so that a handler that uses its whole budget still answers in
// time; the skew never lengthens it. The check trusts the two hosts'
// clocks to agree within that skew. A Java requester's requests carry no
// deadline and run as before.
//
// A failed handler (an error or a recovered panic) leaves its request to
// be received again (Options.Retry); with a RedrivePolicy on the request
// queue, a request that keeps failing ends in the dead-letter queue after
// maxReceiveCount receives.
//
// Replies, deletes and visibility changes go through batching coalescers:
// a lone call goes out at once, and concurrent ones share batch calls. The
// delete of a handled request, which nobody waits for, first waits for
// others to share its call, up to a tenth of the visibility the request has
// left (at most 2 s, at least 10 ms; Shutdown flushes it), so that even one
// request at a time pays a fraction of a delete call instead of one.
//
// # Stopping
//
// Shutdown(ctx) stops the responder the way http.Server.Shutdown stops a
// server: no new receive, running handlers may finish until ctx ends, then
// the rest are cancelled (cause ErrClosed) and their requests made visible
// again; replies, deletes and visibility changes are flushed. It returns
// nil when no handler had to be abandoned and ctx.Err() otherwise.
// Cancelling Serve's context stops that Serve by the same rules, with
// Options.DrainTimeout as its grace period.
//
// The long poll in flight at a stop is the trade-off. Letting it run out
// would hold an idle responder for up to PollWaitTime (20 s). Cancelling it at
// once is not free either: SQS (and emulators such as fauxqs) may keep the
// cancelled poll parked until its wait ends and hand it a message nobody
// sees, which then reappears only after its visibility timeout. Serve takes
// the middle way: a poll in flight gets half a second. On a busy queue it
// returns within that time and what it took is released at once; a poll
// still parked after it belongs to a queue with little traffic, and is
// cancelled. Requests released later by this Serve (abandoned handlers,
// retries) are kept hidden until such a poll's wait has ended, so they
// cannot fall into it. An idle Serve thus stops in about 0.5 s. Measured
// with TestHandover (requests at 50/s, responder B started and A shut down
// five times, about 310 requests): none lost and none delayed, on fauxqs
// and on sqstest; cancelling the poll at once instead delayed 3 of 312
// (1%) on fauxqs by a visibility timeout.
//
// # Cost
//
// At steady load Serve makes well under one API call per request (receives
// of up to 10, batched replies and deletes); one request at a time costs a
// receive, a reply send and, with lingering deletes, a share of a
// delete. An idle Serve makes one long poll per
// PollWaitTime (20 s by default): 180 calls an hour.
//
// # IAM
//
// On the request queue: sqs:ReceiveMessage, sqs:DeleteMessage,
// sqs:ChangeMessageVisibility. On the requesters' host queues (or the reply
// queues Options.AllowReplyTo allows): sqs:SendMessage. The batch APIs are authorised by the same
// actions.
package responder
