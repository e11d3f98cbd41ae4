package wire

import (
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// The values of sqsapi.StreamAttribute and sqsapi.SessionAttribute
// (docs/wire.md, "Sessions"). A stream position is
//
//	<seq>[;final|;end][;credit=<n>][;run=<id>]
//
// and a session request's stream attribute is
//
//	session;credit=<n>[;end][;idle=<ms>]
//
// with ";end" when the request is the caller's only message (the session
// then carries the replies' credit and the caller's cancel), and
// ";idle=<ms>" the session's idle timeout: each side pings after a third
// of it without sending, and gives up on the other after all of it
// without hearing from it. A
// session's control message carries
//
//	open <credit> <session-url> | credit <n> | ping | cancel | abort <reason>
//
// in its session attribute, and its verb as its body.
const (
	// StreamRequested is the stream attribute of a request that takes a
	// reply stream.
	StreamRequested = "1"
	// SessionRequested starts the stream attribute of a request that
	// opens a session: the caller streams more messages after it.
	SessionRequested = "session"

	MarkFinal = "final" // the final reply of a stream
	MarkEnd   = "end"   // an end mark: the stream ended, the message is none of it

	// EndBody is the body of an end mark: SQS takes no empty message.
	EndBody = "end of stream"

	creditKey = "credit="
	runKey    = "run="
	idleKey   = "idle="
)

// Session control verbs.
const (
	ControlOpen   = "open"   // responder to caller: the session's URL and the first credit
	ControlCredit = "credit" // either way: the other side may send up to this sequence number
	ControlPing   = "ping"   // either way: still here, in a session silent for a third of its idle timeout
	ControlCancel = "cancel" // caller to responder: stop the handler, nobody waits
	ControlAbort  = "abort"  // responder to caller: the session failed; the reason follows
)

// StreamPos is the position of a message in a stream.
type StreamPos struct {
	Seq  int
	Mark string // "", MarkFinal or MarkEnd
	// Credit, when positive, grants the receiver of the message the right
	// to send the other way up to (not including) this sequence number.
	Credit int
	// Run names the run of a handler whose reply travels in parts: the
	// parts of one body share it, so that a receiver never joins the
	// parts of two runs of a redelivered request.
	Run string
}

// FormatStream returns the stream attribute value of p.
func FormatStream(p StreamPos) string {
	b := strconv.AppendInt(make([]byte, 0, 24), int64(p.Seq), 10)
	if p.Mark != "" {
		b = append(b, ';')
		b = append(b, p.Mark...)
	}
	if p.Credit > 0 {
		b = append(b, ';')
		b = append(b, creditKey...)
		b = strconv.AppendInt(b, int64(p.Credit), 10)
	}
	if p.Run != "" {
		b = append(b, ';')
		b = append(b, runKey...)
		b = append(b, p.Run...)
	}
	return string(b)
}

// ParseStream parses a stream attribute value; ok is false when it is not
// a position. Unknown parts after the number are ignored, for the
// additions of later versions.
func ParseStream(v string) (p StreamPos, ok bool) {
	num, rest, _ := strings.Cut(v, ";")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return StreamPos{}, false
	}
	p.Seq = n
	for rest != "" {
		var part string
		part, rest, _ = strings.Cut(rest, ";")
		switch {
		case part == MarkFinal || part == MarkEnd:
			if p.Mark == "" {
				p.Mark = part
			}
		case strings.HasPrefix(part, creditKey):
			if c, err := strconv.Atoi(part[len(creditKey):]); err == nil && c > 0 {
				p.Credit = c
			}
		case strings.HasPrefix(part, runKey):
			p.Run = part[len(runKey):]
		}
	}
	return p, true
}

// StreamOf returns the stream position a message carries.
func StreamOf(m types.Message) (StreamPos, bool) {
	v, ok := m.MessageAttributes[sqsapi.StreamAttribute]
	if !ok || v.StringValue == nil {
		return StreamPos{}, false
	}
	return ParseStream(*v.StringValue)
}

// SessionAsk is what a session request asks for.
type SessionAsk struct {
	Credit int           // the replies the responder may send before it hears more; 0: none named
	End    bool          // the request is the caller's only message
	Idle   time.Duration // the idle timeout; 0: none
}

// SessionRequest returns the stream attribute value of a request that
// opens the session a asks for.
func SessionRequest(a SessionAsk) string {
	v := SessionRequested + ";" + creditKey + strconv.Itoa(a.Credit)
	if a.End {
		v += ";" + MarkEnd
	}
	if a.Idle > 0 {
		v += ";" + idleKey + strconv.FormatInt(a.Idle.Milliseconds(), 10)
	}
	return v
}

// ParseSessionRequest reports whether a request's stream attribute value
// asks for a session, and what it asks for.
func ParseSessionRequest(v string) (a SessionAsk, ok bool) {
	head, rest, _ := strings.Cut(v, ";")
	if head != SessionRequested {
		return SessionAsk{}, false
	}
	for rest != "" {
		var part string
		part, rest, _ = strings.Cut(rest, ";")
		switch {
		case part == MarkEnd:
			a.End = true
		case strings.HasPrefix(part, creditKey):
			if c, err := strconv.Atoi(part[len(creditKey):]); err == nil && c > 0 {
				a.Credit = c
			}
		case strings.HasPrefix(part, idleKey):
			if ms, err := strconv.ParseInt(part[len(idleKey):], 10, 64); err == nil && ms > 0 && ms <= maxIdleMillis {
				a.Idle = time.Duration(ms) * time.Millisecond
			}
		}
	}
	return a, true
}

// maxIdleMillis bounds an idle timeout on the wire: 12 hours, SQS's
// longest visibility, beyond which a session is not held anyway.
const maxIdleMillis = 12 * 60 * 60 * 1000

// Control is a session's control message.
type Control struct {
	Verb   string // ControlOpen, ControlCredit, ControlCancel or ControlAbort
	Credit int    // open, credit
	URL    string // open: the session queue's URL
	Reason string // abort
}

// Format returns the session attribute value of c.
func (c Control) Format() string {
	switch c.Verb {
	case ControlOpen:
		return c.Verb + " " + strconv.Itoa(c.Credit) + " " + c.URL
	case ControlCredit:
		return c.Verb + " " + strconv.Itoa(c.Credit)
	case ControlAbort:
		return c.Verb + " " + c.Reason
	}
	return c.Verb
}

// ParseControl parses a session attribute value; ok is false for one that
// is no control message this version knows (ignored by the receiver).
func ParseControl(v string) (c Control, ok bool) {
	verb, rest, _ := strings.Cut(v, " ")
	c.Verb = verb
	switch verb {
	case ControlOpen:
		num, u, _ := strings.Cut(rest, " ")
		n, err := strconv.Atoi(num)
		if err != nil || n <= 0 || !IsVirtualQueueURL(u) {
			return Control{}, false
		}
		if _, _, err := ParseVirtualQueueURL(u); err != nil {
			return Control{}, false
		}
		c.Credit, c.URL = n, u
	case ControlCredit:
		n, err := strconv.Atoi(rest)
		if err != nil || n <= 0 {
			return Control{}, false
		}
		c.Credit = n
	case ControlCancel, ControlPing:
	case ControlAbort:
		c.Reason = rest
	default:
		return Control{}, false
	}
	return c, true
}

// ControlOf returns the control message m carries, if it is one.
func ControlOf(m types.Message) (c Control, isControl, ok bool) {
	v, found := m.MessageAttributes[sqsapi.SessionAttribute]
	if !found || v.StringValue == nil {
		return Control{}, false, false
	}
	c, ok = ParseControl(*v.StringValue)
	return c, true, ok
}
