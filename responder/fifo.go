package responder

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// fifoReplyIDs returns the MessageGroupId and MessageDeduplicationId of a
// reply to a FIFO response queue, which SQS requires. The group is the
// reply's virtual queue (a requester's reply queue on a FIFO host: each
// reply queue its own group, its replies in the order sent) or, for a
// plain FIFO response queue, the request's id, so that replies to one
// request keep their order and other requests' do not wait for them. The
// deduplication id is new for each reply, and the same for the send's
// retries, which SQS then deduplicates.
func fifoReplyIDs(name, requestID string) (group, dedup *string) {
	g := name
	if g == "" {
		g = requestID
		if wire.CheckFIFOID("", "", &g) != nil {
			g = wire.ScopedID("", "request", requestID)
		}
	}
	return aws.String(g), aws.String(uuid.NewString())
}
