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
// a Java peer ignores. Large replies travel compressed to a requester
// that offers to read them ("Compression" below).
//
// # Where replies may go
//
// Whoever may send to the request queue chooses ResponseQueueUrl, and
// could otherwise make the responder write into any queue its role may
// write to, so the responder checks it before anything else: by default a
// reply goes only to a queue in the request queue's own account and region
// whose name starts with sqsapi.DefaultQueuePrefix, that is, to the host
// queue of a Go or Java requester with the default prefix (a virtual
// queue's reply goes to its host queue, and that is what is checked). Off
// AWS, account and region are the endpoint: scheme, host and port, where
// every spelling of this machine's loopback is one host (127.0.0.0/8, ::1,
// localhost and names under .localhost such as fauxqs's
// sqs.us-east-1.localhost, LocalStack's localhost.localstack.cloud and
// names under it). Options.AllowReplyTo adds queue-name prefixes (a
// requester's custom Prefix, "orders-rpc-": queues whose names start with
// it, in the request queue's account and region) and queue-URL prefixes,
// with a scheme, host and path: queues whose URL starts with one (hosts
// compared as above), in any account or region; end one with '/' to allow
// a whole account. A request naming any other queue is deleted without
// running its handler, counted in Stats.Dropped (reason "refused" for the
// Observer) and logged at Warn (at most once a minute); its caller sees
// only a timeout, and SendResponseMessage returns ErrReplyRefused for it.
// Grant the responder's role sqs:SendMessage only on the same queues
// (docs/iam.md).
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
// sees each reply before its checks and after its send, and hears of each
// handler run, dropped request and release; Options.Propagator writes
// into each reply before it goes (the oteltempq module's reply spans hang
// on the pair).
// Process handles one request received by other means (a Lambda SQS event:
// the lambdatempq module) exactly as Serve handles one, and leaves the delete
// or release to its caller.
//
// # Observing
//
// Options.Observer is told (package observe):
//
//   - Reply, before each reply is checked and sent (the handler's final
//     Reply, each message a handler sends with Request.Send, a reply
//     replayed from the Store). Message is a copy of the outgoing reply
//     (Body and MessageAttributes, with what Options.Propagator added).
//     Queue is the response queue's URL, Detail a copy of the *Request
//     (Send and Recv on it fail). ctx is the one the Propagator returned,
//     else the context the handler (inside all Middleware) ran under, or
//     for a streamed message the one given to Send, without their
//     cancellation. The Observer may
//     return a done func: it is called once when the send ends, perhaps on
//     a batch call's goroutine, always with a nil reply (a send returns no
//     message; the outgoing one was Event.Message) and err nil if the
//     reply was sent, else why not (a failed check included, before any
//     call). A reply's trace span hangs on this pair.
//   - Handled, after each handler run: Duration is the handler's time, Err
//     its error (a *PanicError after a panic).
//   - Dropped, for a request deleted without its handler run or its reply
//     sent; Reason is "expired" (its caller's deadline had passed),
//     "refused" (its reply may not go where it asks, AllowReplyTo),
//     "reply-queue-gone" (the response queue no longer exists),
//     "duplicate" (answered again from the Store), "cancelled" (the caller
//     went away, or its deadline passed, while the handler ran),
//     "aborted" (a session ended without an answer; its caller was told)
//     or "malformed" (its compressed body does not decompress, or would
//     inflate past 64 MiB: it never could be handled).
//   - Released, for a request made visible again early; Reason is "failed"
//     (BackoffBase), "in-progress" (the Store says another consumer holds it) or
//     "stopping" (a stop came first), Duration the delay. Serve tells it
//     once the release is done; Process, whose caller releases, when it
//     decides.
//
// For kinds other than Reply, the func the Observer returns is never
// called: return nil.
//
// Options.Propagator writes into each reply the Reply event tells of,
// before that event, under the context the event would get otherwise. It
// has room for as many message attributes as SQS's 10 leave beside the
// reply's own and the responder's (the correlation id, the routing name
// of a virtual queue, a stream's sequence number and origin) and may add
// an AWSTraceHeader system attribute; what it adds is checked with the
// rest before any call, and a failed check reaches the Observer's done.
//
// # Compression
//
// A reply of 8 KiB or more that shrinks by a tenth, to a request that
// offers gzip in TempQueues.Accept (every tempqueues requester's, unless
// it disables it), travels gzipped in the Binary attribute
// TempQueues.Body, unless Options.DisableCompression: every message sent
// back for it, a stream's and a session's included. A Java requester
// offers nothing and gets plain replies. SQS's 1 MiB applies to what is
// sent, so a 3 MiB JSON reply goes in 700 KiB. Serve and Process inflate
// a compressed request (requester.Options.CompressRequests) before
// anything sees it, and drop the attributes of compression from
// Request.Message; one that does not decompress, or would inflate past
// 64 MiB, can never be handled: it is deleted unanswered, logged at Warn
// and told to the Observer as Dropped, "malformed". A loop of your own
// gets requests as SQS delivers them. Details: docs/wire.md,
// "Compression".
//
// # Large replies
//
// A reply over 448 KiB even compressed goes through Options.PayloadStore
// when it is set (docs/cost.md says why there). Without one, a reply too
// large for one message even compressed, to a request that offers to join
// parts (parts in TempQueues.Accept: a tempqueues
// requester's call waiting for one reply) travels in parts of up to
// 1 MiB, up to 64 MiB (docs/limits.md), each compressed on its own when
// that pays; the parts stop when the caller's deadline passes, and the
// request is then dropped as "cancelled". A reply over the limit fails
// as an invalid reply before any part goes, and its caller is told at
// once. A Java requester offers no parts: its reply fails as an invalid
// one. Details: docs/wire.md, "Replies in parts".
//
// # Sessions
//
// A session (requester.OpenSession) opens when its handler first reads or
// sends, or has run for a fifth of a second. On the first one it opens,
// a responder creates a host queue named with Options.SessionQueuePrefix
// for the messages its callers stream after their requests; it is
// heartbeated like a requester's host queue and deleted by Shutdown.
// Serving sessions needs a client with the queue operations (an
// *sqs.Client has them) and sqs:CreateQueue, sqs:TagQueue and
// sqs:DeleteQueue on queues with that prefix (docs/iam.md).
//
// # Delivery semantics
//
// SQS delivers at least once, and so does Serve: a request is deleted only
// after its handler succeeded and its reply was sent. A handler may
// therefore see a request again after a crash, a failed delete, a lost
// visibility extension or an SQS duplicate. With Options.Store set, a
// request id that was answered before is answered again from the stored
// reply without running the handler, and one being handled elsewhere is
// put back rather than run twice; the built-in NewMemoryStore covers one
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
// be received again (Options.BackoffBase); with a RedrivePolicy on the request
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
// the rest are cancelled (cause sqsapi.ErrClosed) and their requests made visible
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
// cannot fall into it. An idle Serve thus stops in about 0.5 s; what the
// half second buys is in BENCHMARKS.md ("Stopping").
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
