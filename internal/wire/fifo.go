package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/uuid"
)

// MaxFIFOIDLength is SQS's limit on a MessageGroupId or
// MessageDeduplicationId, in characters.
const MaxFIFOIDLength = 128

// IsFIFOURL reports whether the queue URL u, or the host queue of the
// virtual queue URL u, names a FIFO queue: SQS requires FIFO queue names
// to end in ".fifo".
func IsFIFOURL(u string) bool { return strings.HasSuffix(HostURLOf(u), ".fifo") }

// CheckFIFOID rejects a MessageGroupId or MessageDeduplicationId (param)
// that SQS would refuse: it must have 1 to 128 characters, each a letter,
// a digit or ASCII punctuation. A nil id passes.
func CheckFIFOID(op, param string, id *string) error {
	if id == nil {
		return nil
	}
	s := *id
	if s == "" || len(s) > MaxFIFOIDLength {
		return Invalid(op, param, "%q must have 1 to %d characters", s, MaxFIFOIDLength)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return Invalid(op, param, "%q: character %q at byte %d is not a letter, digit or punctuation", s, c, i)
		}
	}
	return nil
}

// CheckFIFOSend checks a message for the plain FIFO queue queueURL before
// its call: SQS requires a MessageGroupId and refuses a per-message
// DelaySeconds (the queue's own delay applies). The deduplication id is
// left to the queue's ContentBasedDeduplication, which the caller may not
// know. A message for a standard queue only has its ids checked, and
// refuses a MessageDeduplicationId, as SQS does.
func CheckFIFOSend(op, queueURL string, group, dedup *string, delay int32) error {
	if err := CheckFIFOID(op, "MessageGroupId", group); err != nil {
		return err
	}
	if err := CheckFIFOID(op, "MessageDeduplicationId", dedup); err != nil {
		return err
	}
	if !IsFIFOURL(queueURL) {
		if dedup != nil {
			return Invalid(op, "MessageDeduplicationId", "only FIFO queues take one; %s is a standard queue", queueURL)
		}
		return nil
	}
	if group == nil {
		return Invalid(op, "MessageGroupId", "required by FIFO queue %s", queueURL)
	}
	if delay != 0 {
		return Invalid(op, "DelaySeconds", "%d: FIFO queue %s takes no per-message delay", delay, queueURL)
	}
	return nil
}

// VirtualFIFOIDs returns the MessageGroupId and MessageDeduplicationId of
// a message for the virtual queue name on a FIFO host, after checking the
// caller's. The group is the virtual queue's name: each virtual queue is
// one message group, so virtual queues never hold each other up and each
// keeps its order (whatever group the caller gave, which only has to be
// valid). The deduplication id is scoped to the virtual queue, so equal
// ids (or bodies) sent to two virtual queues of one host are not taken for
// duplicates: the caller's id hashed with the name; with none, the body
// hashed with the name when contentDedup (the host's
// ContentBasedDeduplication) is on, and a new UUID otherwise.
func VirtualFIFOIDs(op, name string, group, dedup *string, delay int32, body *string, contentDedup bool) (*string, *string, error) {
	if err := CheckVirtualFIFO(op, group, dedup, delay); err != nil {
		return nil, nil, err
	}
	var id string
	switch {
	case dedup != nil:
		id = ScopedID(name, "id", *dedup)
	case contentDedup:
		id = ScopedID(name, "body", aws.ToString(body))
	default:
		id = uuid.NewString()
	}
	return aws.String(name), aws.String(id), nil
}

// CheckVirtualFIFO checks the caller's part of a message for a virtual
// queue on a FIFO host: well-formed ids, if given, and no per-message
// delay.
func CheckVirtualFIFO(op string, group, dedup *string, delay int32) error {
	if err := CheckFIFOID(op, "MessageGroupId", group); err != nil {
		return err
	}
	if err := CheckFIFOID(op, "MessageDeduplicationId", dedup); err != nil {
		return err
	}
	if delay != 0 {
		return Invalid(op, "DelaySeconds", "%d: a virtual queue on a FIFO host takes no per-message delay", delay)
	}
	return nil
}

// ScopedID returns a deduplication id for key within scope: 64 hex
// digits of a SHA-256 over both, a valid MessageDeduplicationId whatever
// their lengths.
func ScopedID(scope, kind, key string) string {
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil))
}
