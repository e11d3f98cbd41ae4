// Package sqstest is an in-process Amazon SQS server for tests and for
// running programs without an AWS account. It speaks both SQS protocols
// over HTTP on 127.0.0.1, chosen per request: the AWS JSON 1.0 protocol of
// current SDKs (X-Amz-Target) and the older query protocol (form-encoded
// Action=..., XML answers) of the AWS SDK for Java v1, older boto3 and
// aws-sdk-go releases and the aws CLI 2.9. It keeps everything in memory,
// or with Options.DataDir in a journal on disk, and adds controls that a
// real queue cannot offer: a clock the test moves, injected faults, and
// per-operation API-call counts.
//
// A test starts one with Start, which closes it when the test ends:
//
//	func TestWorker(t *testing.T) {
//		srv := sqstest.Start(t)
//		client := srv.Client() // *sqs.Client, region us-east-1, dummy credentials
//		q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
//		...
//	}
//
// Start takes a TB (the methods of testing.TB it uses), so that programs
// which run the server without a test, like the command tempq, do not link
// package testing. Outside tests, NewServer starts one and Close(ctx) stops
// it.
//
// Any SDK or tool can also use its URL() as the SQS endpoint (for the Go
// SDK, sqs.Options.BaseEndpoint or AWS_ENDPOINT_URL_SQS). The server is an
// http.Handler too: NewHandler returns one to mount in your own server.
// The command `tempq emulator` serves it standalone.
//
// # Behaviour
//
// The server implements CreateQueue, GetQueueUrl, ListQueues, DeleteQueue,
// GetQueueAttributes, SetQueueAttributes, TagQueue, UntagQueue,
// ListQueueTags, PurgeQueue, ListDeadLetterSourceQueues, SendMessage,
// SendMessageBatch, ReceiveMessage, DeleteMessage, DeleteMessageBatch,
// ChangeMessageVisibility and ChangeMessageVisibilityBatch, as SQS documents
// them, including:
//
//   - standard and FIFO queues: message groups delivered in order, as many
//     of one group's messages as a receive can take before another's, and
//     locked while a message of the group is in flight; deduplication by id
//     or by content within 5 minutes, queue-wide or per group
//     (DeduplicationScope), a duplicate answered with the original
//     MessageId and SequenceNumber; SequenceNumber on send and receive;
//   - visibility timeouts (queue default and per receive), message and queue
//     delays, retention, redrive to a dead-letter queue after
//     maxReceiveCount receives;
//   - long polling that parks the request and wakes it when a message
//     becomes visible: a parked receive costs no CPU;
//   - exact ApproximateNumberOfMessages, ...NotVisible and ...Delayed;
//   - MD5OfMessageBody and MD5OfMessageAttributes computed as AWS does;
//   - the limits and validation of SQS: 1 MiB messages (body plus
//     attributes), 10 message attributes, 10 entries per batch,
//     MaxNumberOfMessages 1-10, WaitTimeSeconds 0-20, DelaySeconds 0-900,
//     visibility 0-12 h (also in total since receipt), queue attribute
//     ranges, queue name rules, and the characters SQS accepts (emoji
//     included);
//   - errors as AWS sends them: HTTP 400 with the error shape in __type and
//     the x-amzn-query-error header, so the SDK's typed errors work:
//     errors.As(err, new(*types.QueueDoesNotExist)); over the query protocol,
//     an ErrorResponse document with the legacy code
//     (AWS.SimpleQueueService.NonExistentQueue).
//
// A conformance suite runs the same checks against this server, against it
// over the query protocol, and against the fauxqs emulator, so that all
// keep to what AWS does.
//
// # Persistence
//
// With Options.DataDir every change is appended to a journal in that
// directory and synced to disk before its request is answered; a server
// started on the same directory, even after a crash, has every queue and
// message (attributes, tags, delays, visibility, receive counts, receipt
// handles, FIFO deduplication ids within their five minutes) the last one
// acknowledged. The journal is compacted in the background as it grows, and
// the directory is locked: a second server on it fails to start, naming the
// process that holds it.
//
// # Test controls
//
//   - Options.Clock: pass a *Clock (NewClock) and call Advance or Set to
//     expire visibility timeouts, end delays, drop messages past retention
//     and end long polls, without sleeping. Parked receives and delayed
//     messages react to Advance. Server.Parked tells a test when its
//     receives are parked. With a Clock a long poll ends only when the
//     clock passes its wait time, a message arrives or its client gives up.
//   - Server.InjectFault: fail calls of an operation with any error code
//     (Fail: "RequestThrottled" is SQS's throttling, "InternalFailure" a
//     500, "ServiceUnavailable" a 503), or add latency (Latency), for every call
//     or, with Fault.Times, the next n; Latency with a 99th percentile above
//     its median draws each call's wait from a lognormal distribution.
//   - Server.Calls: requests received per operation, failed ones included,
//     as SQS would bill them.
//   - Options.Quotas: throttle calls beyond SQS's rate limits (its tagging
//     quota, or others: see Quota); Server.Throttled counts the calls they
//     throttled.
//   - Server.Seed puts messages in a queue without the SDK, visible,
//     delayed, in flight or received before, and Server.Messages returns a
//     snapshot of a queue's messages with their receive count and
//     visibility deadline, without receiving them. QueueURLs,
//     QueueAttributes and QueueTags return the rest of the server's state.
//     Like SDK calls, they are safe to use while the server runs.
//
// # What it does not emulate
//
//   - Authentication and authorization: no SigV4 signature check, no IAM, no
//     queue policies (Policy is stored and returned, never enforced);
//     AddPermission and RemovePermission answer UnsupportedOperation.
//   - The 60 s wait before a deleted queue's name can be reused
//     (QueueDeletedRecently), the 60 s minimum between purges
//     (PurgeQueueInProgress), and the delay of up to 60 s before a purge or
//     a new queue takes effect on AWS: here everything is immediate.
//   - Distribution: receives always see every visible message (short polls
//     do not sample servers), counts are exact rather than approximate, and
//     a standard queue never delivers a message twice while it is in flight.
//     Code must still tolerate duplicates on AWS.
//   - Throughput quotas and throttling, except the quotas Options.Quotas
//     lists (inject the rest with faults), and the 120,000 in-flight
//     message limit of standard queues (and FIFO's).
//   - Encryption (KMS and SSE attributes are stored only), RedriveAllowPolicy
//     enforcement, message move tasks across a restart (a running one ends),
//     high-throughput FIFO partitioning, ReceiveRequestAttemptId retries, and
//     list-typed message attribute values.
//   - Multiple accounts and regions: the account id and region are fixed per
//     server (Options.AccountID, Options.Region); a QueueUrl must be a URL,
//     but its host is ignored: only its last path segment names the queue.
package sqstest
