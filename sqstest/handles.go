package sqstest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
)

// A receipt handle names the queue, the message and the receive it came
// from, plus random bytes so handles cannot be guessed from one another.
// Encoding the message id (rather than keeping a handle table) lets the
// server tell a malformed handle (ReceiptHandleIsInvalid) from a stale one
// (an earlier receive of a message since received again), which SQS treats
// differently.
func newReceiptHandle(q *queue, m *message) string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	raw := q.name + "\x00" + m.id + "\x00" + strconv.Itoa(m.receives) + "\x00" + hex.EncodeToString(r[:])
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// parseReceiptHandle returns the message id of a handle issued by q.
func parseReceiptHandle(q *queue, handle string) (string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(handle)
	if err != nil {
		return "", false
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) != 4 || parts[0] != q.name {
		return "", false
	}
	return parts[1], true
}
