package wire

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// DeadlineClockSkew is how far the clocks of a requester's and a
// responder's hosts are assumed to agree at most. A responder waits this
// long past a request's sqsapi.DeadlineAttribute before it treats the
// deadline as passed, so a responder whose clock runs ahead by less never
// drops a request its caller still waits for; hosts synchronised by NTP or
// the Amazon Time Sync Service agree within milliseconds.
const DeadlineClockSkew = time.Second

// deadlineBytes is what the deadline attribute adds to a message's size:
// its name, its DataType and up to 13 digits of Unix milliseconds.
const deadlineBytes = len(sqsapi.DeadlineAttribute) + len("String") + 13

// StampDeadline adds sqsapi.DeadlineAttribute with deadline to the
// attributes of a request with body to queueURL when the message has room
// for it, counting the routing attribute a send to a virtual queue adds
// later. It reports whether it did; a message without room goes without,
// as a Java requester's requests do.
func StampDeadline(attrs map[string]types.MessageAttributeValue, body *string, queueURL string, deadline time.Time) bool {
	n, size := len(attrs)+1, MessageSize(body, attrs)+deadlineBytes
	if IsVirtualQueueURL(queueURL) {
		n++
		size += len(sqsapi.VirtualQueueNameAttribute) + len("String") + MaxQueueNameLength
	}
	if deadline.IsZero() || n > sqsapi.MaxMessageAttributes || size > sqsapi.MaxMessageSize {
		return false
	}
	attrs[sqsapi.DeadlineAttribute] = StringAttribute(strconv.FormatInt(deadline.UnixMilli(), 10))
	return true
}

// Deadline returns the deadline a request carries in
// sqsapi.DeadlineAttribute: ok is false when it carries none, and err is
// set when the attribute is there but not Unix milliseconds.
func Deadline(m types.Message) (deadline time.Time, ok bool, err error) {
	v, found := m.MessageAttributes[sqsapi.DeadlineAttribute]
	if !found || v.StringValue == nil {
		return time.Time{}, false, nil
	}
	ms, err := strconv.ParseInt(*v.StringValue, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}, false, Invalid("request", sqsapi.DeadlineAttribute, "%q is not a time in Unix milliseconds", *v.StringValue)
	}
	return time.UnixMilli(ms), true, nil
}
