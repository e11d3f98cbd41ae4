package payload

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// A reply too large for one message even compressed, to a requester that
// joins parts (PartsToken in its offer) and from a responder with no
// PayloadStore, travels as parts: messages that each carry a piece of the
// body, numbered as a reply stream's, which the requester joins back
// (docs/wire.md, "Replies in parts").
const (
	// PartsToken is the value in AcceptAttribute's list by which a
	// requester says that it joins a reply sent in parts.
	PartsToken = "parts"
	// MaxJoined is the largest reply that travels in parts, the figure of
	// docs/limits.md: the same as a payload's in a store.
	MaxJoined = MaxPayload
	// MaxParts bounds the number of a reply's parts: the responder sends
	// parts of at least MinPart bytes, so a reply of MaxJoined needs no
	// more, and a joiner refuses a part numbered past it.
	MaxParts = 1024
	// MinPart is the smallest piece a responder cuts a reply into, but for
	// the last: a reply whose own attributes leave less room in a message
	// is not sent in parts.
	MinPart = MaxJoined / MaxParts
)

// AcceptsParts reports whether a request's attributes offer to join a
// reply sent in parts: AcceptAttribute lists PartsToken.
func AcceptsParts(attrs map[string]types.MessageAttributeValue) bool {
	return offers(attrs, PartsToken)
}

// Split cuts body into pieces of at most size bytes, and of size bytes
// but for the last, less the few bytes of a UTF-8 character cut at a
// piece's end, which starts the next piece: each piece of a text SQS takes
// is a text SQS takes. size must be at least utf8.UTFMax.
func Split(body string, size int) []string {
	pieces := make([]string, 0, (len(body)+size-1)/size)
	for len(body) > size {
		n := size
		for n > size-utf8.UTFMax && !utf8.RuneStart(body[n]) {
			n--
		}
		pieces = append(pieces, body[:n])
		body = body[n:]
	}
	return append(pieces, body)
}

// Joiner joins the parts of one reply as they arrive, in any order and
// perhaps twice: the parts in order so far are joined at once, and those
// that came early are held until their turn. What it holds is at most
// MaxJoined bytes of the parts' bodies. The zero Joiner is ready; it is
// not safe for concurrent use.
type Joiner struct {
	joined strings.Builder
	next   int            // the number of the part joined next
	early  map[int]string // parts that came before their turn
	held   int            // bytes joined and held
	final  int            // the last part's number plus one, 0 while unknown
}

// Add takes part seq (0 first), whose body is body, final when it is the
// last, and reports whether the reply is complete. A part seen already,
// or numbered past the last, is ignored. A part numbered past MaxParts, a
// final part numbered below one that arrived, or parts that add up past
// MaxJoined are an error matching ErrCorrupt or ErrTooLarge, after which
// the Joiner should be dropped.
func (j *Joiner) Add(seq int, final bool, body string) (complete bool, err error) {
	switch {
	case seq < 0 || seq >= MaxParts:
		return false, fmt.Errorf("%w: part %d of a reply in parts, past the %d a reply may have", ErrCorrupt, seq, MaxParts)
	case seq < j.next || j.final > 0 && seq >= j.final:
		return j.complete(), nil // a duplicate, or a part past the last
	}
	if _, dup := j.early[seq]; dup {
		return false, nil
	}
	if final {
		if j.final > 0 && j.final != seq+1 {
			return false, fmt.Errorf("%w: two last parts, %d and %d", ErrCorrupt, j.final-1, seq)
		}
		for n := range j.early {
			if n > seq {
				return false, fmt.Errorf("%w: the last part is %d, and part %d arrived", ErrCorrupt, seq, n)
			}
		}
		j.final = seq + 1
	}
	if j.held+len(body) > MaxJoined {
		return false, fmt.Errorf("%w: the parts of a reply add up to more than %d MiB", ErrTooLarge, MaxJoined>>20)
	}
	j.held += len(body)
	if seq != j.next {
		if j.early == nil {
			j.early = make(map[int]string)
		}
		j.early[seq] = body
		return false, nil
	}
	j.joined.WriteString(body)
	j.next++
	for {
		b, ok := j.early[j.next]
		if !ok {
			break
		}
		delete(j.early, j.next)
		j.joined.WriteString(b)
		j.next++
	}
	return j.complete(), nil
}

// complete reports whether every part was joined.
func (j *Joiner) complete() bool { return j.final > 0 && j.next == j.final }

// Body returns the joined reply, once Add reported it complete.
func (j *Joiner) Body() string { return j.joined.String() }

// Held returns the bytes of the parts the Joiner holds.
func (j *Joiner) Held() int { return j.held }
