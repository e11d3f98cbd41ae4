package redrive

import (
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

const attemptAttr = sqsapi.RedriveAttemptAttribute

// attempt is the state a message carries in its attempt attribute.
type attempt struct {
	n   int       // replays done; for a scheduled copy, the number of the replay to come
	due time.Time // set on a scheduled copy: when the replay is due on the target
}

// parseAttempt reads the attempt attribute of m: "n" or "n@<epoch ms>".
// A message without it has had no replay.
func parseAttempt(m types.Message) (attempt, bool) {
	v, ok := m.MessageAttributes[attemptAttr]
	if !ok {
		return attempt{}, true
	}
	s := strings.TrimSpace(aws.ToString(v.StringValue))
	count, dueMS, scheduled := strings.Cut(s, "@")
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 {
		return attempt{}, false
	}
	a := attempt{n: n}
	if scheduled {
		ms, err := strconv.ParseInt(dueMS, 10, 64)
		if err != nil || n < 1 {
			return attempt{}, false
		}
		a.due = time.UnixMilli(ms)
	}
	return a, true
}

// String formats a as the attribute value.
func (a attempt) String() string {
	s := strconv.Itoa(a.n)
	if !a.due.IsZero() {
		s += "@" + strconv.FormatInt(a.due.UnixMilli(), 10)
	}
	return s
}

// withAttempt returns a copy of attrs with the attempt attribute set to a.
// The value is ASCII digits and '@', and everything else a replay sends
// came from SQS, so replays need no check of their characters
// (wire.CheckMessageText).
func withAttempt(attrs map[string]types.MessageAttributeValue, a attempt) map[string]types.MessageAttributeValue {
	out := make(map[string]types.MessageAttributeValue, len(attrs)+1)
	for k, v := range attrs {
		out[k] = v
	}
	out[attemptAttr] = wire.StringAttribute(a.String())
	return out
}

// Attempts returns the number of replays recorded on a message received
// from any queue (0 without the attribute), and whether the attribute is
// well formed. A message waiting on the dead-letter queue for a long delay
// reports the replay to come.
func Attempts(m types.Message) (int, bool) {
	a, ok := parseAttempt(m)
	return a.n, ok
}
