// Package virtualqueue multiplexes any number of in-memory virtual queues over
// one real SQS host queue, wire-compatible with AWS's Java Temporary Queue
// Client (AmazonSQSVirtualQueuesClient).
//
// A *Client wraps an SQS client and has the *sqs.Client method signatures, so
// it is a drop-in replacement: calls on real queue URLs pass straight
// through, and calls on virtual queue URLs ("<host-url>#<name>") are served
// locally or rewritten to the host queue.
//
//   - CreateQueue with the attribute HostQueueUrl creates a virtual queue with
//     no API call once the host is known (the first virtual queue on a host
//     reads its VisibilityTimeout and ReceiveMessageWaitTimeSeconds once). The
//     attribute IdleQueueRetentionPeriodSeconds makes it expire after that many
//     idle seconds.
//   - SendMessage and SendMessageBatch on a virtual URL send to the host queue
//     with the String message attribute
//     "__AmazonSQSVirtualQueuesClient.QueueName" set to the virtual queue's
//     name. Lone sends go out at once; concurrent sends to one host share
//     SendMessageBatch calls.
//   - Each host queue is served by the library's host-queue core (see
//     docs/architecture.md): its pollers long-poll it only while some
//     receiver waits (an idle host costs no calls) and route each message to
//     its virtual queue's bounded buffer or straight to a waiting receiver.
//   - ReceiveMessage on a virtual URL waits on that buffer. A waiting receive
//     holds no goroutine beyond its caller's.
//
// # Delivery: at least once
//
// Unlike the Java client, which deletes each host message as soon as it is
// buffered (at most once: lost on a crash), a routed message stays in flight on
// the host queue until the consumer deletes it. The receipt handle returned by
// ReceiveMessage on a virtual URL is the host message's, and DeleteMessage,
// ChangeMessageVisibility and their batch forms on the virtual URL act on the
// host message. A message received but not deleted reappears on the host
// queue when its visibility timeout ends and is routed again. Buffered
// messages nobody takes are released (visibility 0) shortly before their
// visibility timeout ends, and on Close. Deletes and visibility changes from
// all virtual queues of a host are coalesced into the batch APIs, without
// delaying a lone call.
//
// # Orphans
//
// A host message without the routing attribute, or naming a virtual queue not
// known to this client (never created, deleted or expired; typically a late
// reply to a request that timed out), is an orphan. The default policy deletes
// it, counts it and logs one line; Options.OrphanHandler decides per
// message (delete, release or keep).
//
// # FIFO host queues
//
// A host queue may be a FIFO queue (its URL ends in ".fifo"). Each of its
// virtual queues is then one message group: sends set MessageGroupId to the
// virtual queue's name (a group the caller gives is checked, then replaced),
// so a virtual queue keeps send order and virtual queues never hold each
// other up. The deduplication id is scoped to the virtual queue: the
// caller's MessageDeduplicationId hashed with the name; with none, the body
// hashed with the name when the host has ContentBasedDeduplication, and a
// new UUID otherwise (one per call, so the SDK's retries of it are
// deduplicated). DelaySeconds must be 0. A virtual queue hands out nothing
// while a message received from it is in flight, as SQS does for a group,
// so a message released or left to time out comes back before those
// behind it. Names may end in ".fifo" on a FIFO host only.
//
// # Limits
//
// Virtual queue names follow SQS queue naming rules (1 to 80 of A-Z a-z 0-9 -
// _). The routing attribute counts against
// SQS's limit of 10 message attributes: a message with 10 of its own is
// rejected with an error matching sqsapi.ErrInvalidInput before any call.
// SetQueueAttributes on a virtual URL is rejected; PurgeQueue on one purges
// its buffered messages (deleting them from the host queue) only.
package virtualqueue
