// Package redrive replays the messages of an Amazon SQS dead-letter queue
// to their source queue with exponential backoff and full jitter, counts
// the replays in a message attribute, and parks a message that keeps
// failing in a parking queue for a person to inspect.
//
//	r, err := redrive.New(sqsClient, dlqURL, func(o *redrive.Options) {
//		o.ParkingQueue = parkingURL // required
//		o.MaxAttempts = 5           // replays before parking
//		o.BackoffBase, o.BackoffCap = time.Second, 15*time.Minute
//	})
//	...
//	rep, err := r.Drain(ctx) // until the queue is empty; or r.Run(ctx) until ctx ends
//
// # What happens to a message
//
// The target is Options.Target, or the dead-letter queue's only source
// queue (ListDeadLetterSourceQueues). A message received from the
// dead-letter queue with n replays recorded in its attribute
// TempQueues.RedriveAttempt (sqsapi.RedriveAttemptAttribute; none means 0):
//
//   - n < MaxAttempts: sent to the target with the attribute set to n+1
//     and DelaySeconds = random(0, min(BackoffCap, BackoffBase x 2^n))
//     (full jitter, as in the AWS Architecture Blog's "Exponential Backoff
//     and Jitter"), drawn uniformly from the whole seconds in that range
//     since SQS delays whole seconds;
//   - n >= MaxAttempts: sent to the parking queue unchanged;
//
// and deleted from the dead-letter queue only after that send succeeded:
// nothing is lost, and at worst (a failed delete, a crash between the two
// calls) a message is replayed twice, which the responder's idempotency
// store absorbs. The body, every message attribute (TempQueues.RequestId,
// the reply queue, your own) and the AWSTraceHeader system attribute are
// sent as received. The message gets a new MessageId on every replay;
// the request id is what stays.
//
// # Delays beyond 900 s
//
// SQS delays a message by at most 900 s. A longer delay d is reached in
// steps that never make a call SQS rejects: the message is sent back to
// the dead-letter queue as a copy whose attribute holds the replay number
// and the due time ("3@1767225600000"), delayed by min(900 s, d-900 s),
// and the original deleted ("schedule"). Whoever receives the copy
// before it is due hides it again with ChangeMessageVisibility until 900 s
// before the due time, at most 12 hours per hop ("wait"); from then on
// it is sent to the target with the remaining delay. The state lives in
// the message, so a Redriver that restarts, or another process, carries
// on where the last one stopped. BackoffCap may be up to 24 hours; keep
// it below the dead-letter queue's retention period.
//
// # The attribute budget
//
// SQS allows 10 message attributes. The attempt attribute is one of them
// (the requester's TempQueues.RequestId and ResponseQueueUrl two more). A
// message that already has 10 other attributes, or would exceed 1 MiB with
// the attribute, cannot be replayed with its count: it is parked unchanged
// with the cause ErrNoRoom, rather than left to loop on the dead-letter
// queue or replayed without a count. A malformed attempt attribute parks
// the message too (ErrBadAttempt).
//
// # Dry run, progress, rate
//
// With Options.DryRun, Drain receives every message once, reports the
// action it would take (with a sample delay) and makes the messages
// visible again at the end; it sends, deletes and re-hides nothing. Only
// the dead-letter queue's receive counts change. Options.Observer is told
// of each message (an observe.Redriven event, its Detail a Detail), and
// Drain and Run return a Report with the counts. Options.RateLimit bounds
// the messages handled per second.
//
// The actions, each an event's Reason:
//
//   - "replay": sent to the target with DelaySeconds, then deleted from
//     the dead-letter queue.
//   - "schedule": the replay delay exceeds 900 s, so a copy carrying the
//     due time was sent back to the dead-letter queue and the original
//     deleted.
//   - "wait": a scheduled copy received before its due time was hidden
//     again (a visibility hop).
//   - "park": sent unchanged to the parking queue, then deleted from the
//     dead-letter queue; Detail.Cause says why.
//
// # Stopping
//
// Cancelling the context of Run (or Drain) is the graceful stop, by the
// rules the responder's Shutdown follows: no new receive, a long poll in
// flight gets half a second and what it returns is made visible again,
// the batch at hand is finished, and Run returns its report and nil
// (Drain, which did not reach the end, returns ctx's error). An idle Run
// stops in about half a second. Messages made visible again at a stop stay
// hidden until no long poll the stop cancelled can take them: a server may
// keep such a poll parked until its wait ends.
//
// # Cost
//
// Messages are handled in batches of up to 10: one ReceiveMessage, one
// SendMessageBatch per destination queue and one DeleteMessageBatch per
// batch, so a full batch costs 0.3 calls per replayed message and a lone
// message 3 calls. Drain ends with one empty receive (a 1-second long
// poll); Run long-polls for PollWaitTime (20 s by default, 180 calls an hour
// when idle). A delay beyond 900 s adds a send and a delete, one
// ChangeMessageVisibilityBatch per 12 hours and a receive per step.
//
// # FIFO queues
//
// A FIFO dead-letter queue is replayed to its FIFO source queue (a FIFO
// Options.Target; a FIFO parking queue needs a FIFO dead-letter queue).
// Each replay, scheduled copy and parked message keeps the dead letter's
// MessageGroupId, so receive it with that system attribute when you call
// Process. Its MessageDeduplicationId is made from the dead letter's
// MessageId, never the original's id or the body: a request replayed,
// failed and dead-lettered again within SQS's five-minute deduplication
// window is a new message with a new MessageId and is replayed again,
// while the same dead letter sent twice (a retried send, a replay whose
// delete failed) is deduplicated. SQS refuses per-message DelaySeconds on
// FIFO queues, so every non-zero delay takes the long-delay path above
// with the whole delay waiting on the dead-letter queue: the copy is sent
// undelayed and hidden until due (which holds back its group there, as
// FIFO order wants), then replayed with no delay.
//
// # IAM
//
// On the dead-letter queue: sqs:ReceiveMessage, sqs:DeleteMessage,
// sqs:ChangeMessageVisibility, sqs:SendMessage (long delays) and
// sqs:ListDeadLetterSourceQueues (without Options.Target). On the target
// and parking queues: sqs:SendMessage.
package redrive
