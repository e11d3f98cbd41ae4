package requester

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// checkFIFORequest applies SQS's FIFO rules to a request before any call.
// A request to a plain FIFO queue needs the caller's MessageGroupId; one
// to a virtual queue on a FIFO host gets its group from the virtual queue.
// Neither takes a per-message DelaySeconds.
func checkFIFORequest(op string, in *sqs.SendMessageInput) error {
	to := aws.ToString(in.QueueUrl)
	if !wire.IsVirtualQueueURL(to) || !wire.IsFIFOURL(to) {
		return wire.CheckFIFOSend(op, to, in.MessageGroupId, in.MessageDeduplicationId, in.DelaySeconds)
	}
	return wire.CheckVirtualFIFO(op, in.MessageGroupId, in.MessageDeduplicationId, in.DelaySeconds)
}

// fifoRequestIDs returns the MessageGroupId and MessageDeduplicationId a
// checked request goes out with. Only FIFO targets get ids. Without the
// caller's, the deduplication id derives from the request id: a request is
// deduplicated when sent again with the same TempQueues.RequestId within
// SQS's five minutes, never because another request has the same body
// (which content-based deduplication would do). For a virtual queue on a
// FIFO host the group is the virtual queue and the ids are scoped to it,
// as package virtualqueue does.
func fifoRequestIDs(in *sqs.SendMessageInput, requestID string) (group, dedup *string) {
	to := aws.ToString(in.QueueUrl)
	if !wire.IsFIFOURL(to) {
		return in.MessageGroupId, in.MessageDeduplicationId
	}
	if !wire.IsVirtualQueueURL(to) {
		if in.MessageDeduplicationId != nil {
			return in.MessageGroupId, in.MessageDeduplicationId
		}
		return in.MessageGroupId, aws.String(wire.ScopedID("", "request", requestID))
	}
	_, name, _ := wire.ParseVirtualQueueURL(to)
	if in.MessageDeduplicationId != nil {
		return aws.String(name), aws.String(wire.ScopedID(name, "id", *in.MessageDeduplicationId))
	}
	return aws.String(name), aws.String(wire.ScopedID(name, "request", requestID))
}
