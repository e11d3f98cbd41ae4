package sqsapi

// Wire constants shared with AWS's Java Temporary Queue Client
// (amazon-sqs-java-temporary-queues-client). Go and Java requesters,
// responders and sweepers interoperate through these exact names.
const (
	// HostQueueURLAttribute is the pseudo queue attribute that, passed to
	// CreateQueue, makes a virtual queue on the named host queue. It is also
	// returned by GetQueueAttributes on a virtual queue.
	HostQueueURLAttribute = "HostQueueUrl"

	// IdleQueueRetentionPeriodAttribute is the pseudo queue attribute giving
	// the number of idle seconds after which a virtual queue (or a temporary
	// host queue) may be deleted.
	IdleQueueRetentionPeriodAttribute = "IdleQueueRetentionPeriodSeconds"

	// VirtualQueueNameAttribute is the String message attribute that routes a
	// message sent to a host queue to the virtual queue of that name.
	VirtualQueueNameAttribute = "__AmazonSQSVirtualQueuesClient.QueueName"

	// ResponseQueueURLAttribute is the String message attribute on a request
	// that names the (virtual) queue the reply goes to.
	ResponseQueueURLAttribute = "ResponseQueueUrl"

	// RetentionTag is the queue tag (seconds, decimal) that marks a queue as
	// temporary: the reaper considers only queues carrying it.
	RetentionTag = "__IdleQueueRetentionPeriodSeconds"

	// HeartbeatTag is the queue tag holding the epoch milliseconds of the last
	// heartbeat of a live temporary queue.
	HeartbeatTag = "__AmazonSQSIdleQueueDeletingClient.LastHeartbeatTimestamp"

	// DefaultQueuePrefix is the name prefix of requester host queues, and the
	// prefix the reaper sweeps by default.
	DefaultQueuePrefix = "__RequesterClientQueues__"
)

// Attributes added by tempqueues on top of the Java wire format. A Java peer
// ignores them; they count against SQS's limit of 10 message attributes.
const (
	// RequestIDAttribute is the String message attribute carrying a request's
	// id. It is set by the requester, survives dead-letter redrive (unlike the
	// MessageId) and is the key of the responder's deduplication.
	RequestIDAttribute = "TempQueues.RequestId"

	// CorrelationIDAttribute is the String message attribute on a reply that
	// repeats the request id of the request it answers.
	CorrelationIDAttribute = "TempQueues.CorrelationId"

	// RedriveAttemptAttribute is the String message attribute in which
	// package redrive counts the replays of a dead-lettered message: "3" on
	// a message replayed three times. A message waiting on the dead-letter
	// queue for a replay delay beyond SQS's 900 s carries "<n>@<due>", the
	// number of the replay to come and its due time in epoch milliseconds.
	RedriveAttemptAttribute = "TempQueues.RedriveAttempt"

	// StreamAttribute is the String message attribute of streams. On a
	// request it says the requester takes several replies (any value; the
	// requester sends "1"), or, as "session;credit=<n>", that it also
	// streams more messages after the request (a session): without it the
	// responder sends only the final reply. On a streamed message (either
	// way) it carries the message's sequence number in its stream, from
	// "0", and marks the last one: "<n>;final" (or "<n>;end", an end mark
	// that is none of the stream's messages); in a session it may also
	// grant credit the other way, ";credit=<n>" (docs/wire.md, "Sessions").
	StreamAttribute = "TempQueues.Stream"

	// SessionAttribute is the String message attribute of a session's
	// control messages: "open <credit> <session-url>" (the responder names
	// the virtual queue the caller's later messages go to), "credit <n>",
	// "cancel" (the caller gave up) and "abort <reason>" (the session
	// failed on the responder's side).
	SessionAttribute = "TempQueues.Session"

	// DeadlineAttribute is the String message attribute on a request that
	// holds its caller's deadline in Unix milliseconds. The requester adds
	// it when the message has room (it counts against SQS's 10 attributes
	// and is left off, not an error, when there is none). A responder
	// deletes a request whose deadline has passed without running the
	// handler, and runs the handler of one that has not under that
	// deadline, allowing the two hosts' clocks to differ by up to a second
	// (docs/wire.md, "Deadlines").
	DeadlineAttribute = "TempQueues.Deadline"

	// OriginAttribute is the String message attribute of scatter-gather
	// through a topic. On a request (any value) it asks the responder to
	// say where the request reached it; on the reply it holds the URL of
	// the request queue the responder received the request from.
	OriginAttribute = "TempQueues.Origin"
)

// SQS hard limits that tempqueues checks before making a call.
const (
	MaxMessageAttributes = 10      // message attributes per message
	MaxMessageSize       = 1 << 20 // bytes of body plus attributes
)
