// Package observe is the one way to watch the library at work. Each
// package that does something worth watching takes an Observer in its
// Options and tells it, as an Event of a small fixed vocabulary, what it
// did: the requester sends and drops late replies, the responder
// replies, handles, drops and releases, virtual queues release and drop
// messages, the redriver replays, the reaper sweeps and finds queues gone,
// the backlog monitor measures. Tracing (module oteltempq) is one
// Observer; a test's recorder is another; Join runs several.
//
// An Observer only watches: its Event carries copies, so nothing it does
// reaches the wire or the caller. What must change an outgoing message, a
// trace context above all, is a Propagator, the one hook that writes into
// requests and replies before they are checked and sent.
//
// Stats structs keep the few figures an operator reads; everything finer
// comes through here.
package observe

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Kind is what happened. The vocabulary is fixed: a new kind is a change
// of this package, and an Observer may ignore kinds it does not know.
type Kind uint8

const (
	// Send: a requester is about to send a request. Message is a copy
	// of the outgoing request (Body and MessageAttributes, the
	// Propagator's included). The done func the Observer returns is
	// called once, with the reply or the call's failure.
	Send Kind = iota + 1
	// Reply: a responder is about to send a reply or a streamed message.
	// Message is as for Send; the done func is called once, with a nil
	// reply (a send has no answer message) and the send's error, nil if
	// the message went.
	Reply
	// Handled: a responder's handler finished a request. Message is the
	// request, Duration the handler's time, Err its failure (nil on
	// success).
	Handled
	// Dropped: a message was deleted without its work done; Reason says
	// why, in a word its package documents ("expired", "refused",
	// "duplicate", "orphan", ...).
	Dropped
	// Released: a message was made visible again for a later try; Reason
	// says why, Duration is the delay before it is visible.
	Released
	// Redriven: a redriver acted on a dead letter; Reason is the action
	// and Detail the redriver's own record of it.
	Redriven
	// QueueGone: a queue the library used was found deleted; Queue is its
	// URL and Err what showed it.
	QueueGone
	// Swept: a reaper's sweep ended; Duration is how long it took,
	// Detail its report.
	Swept
	// Measured: a backlog monitor measured its queue; Detail is the
	// figures, Err set if the measure failed.
	Measured
)

var kindNames = [...]string{"", "send", "reply", "handled", "dropped", "released", "redriven", "queue-gone", "swept", "measured"}

// String names the kind in lower case, as metrics and logs use it.
func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return "unknown"
}

// Event is one thing that happened. Fields a kind does not use are zero.
type Event struct {
	Kind Kind
	// Queue is the URL of the queue concerned.
	Queue string
	// Message is a copy of the message concerned: the outgoing one for
	// Send and Reply, the received one otherwise; nil if there is none.
	Message *types.Message
	// RequestID is the request's correlation id, when there is one.
	RequestID string
	// Reason qualifies Dropped, Released and Redriven.
	Reason   string
	Duration time.Duration
	Err      error
	// Detail is the package's own record, as each Kind documents.
	Detail any
}

// Observer is told what happens. Observe runs on a library goroutine, in
// the path of the work it describes, so it must not block; a panic in it
// is recovered and logged. The message of an Event and the reply given to
// the done func are copies: what it changes of them reaches neither the
// wire nor the caller. For Send and Reply it may return a func that
// is called once when the call ends; for other kinds the result is
// ignored, and nil is the usual answer.
type Observer interface {
	Observe(ctx context.Context, e Event) (done func(reply *types.Message, err error))
}

// Propagator writes into an outgoing message what its receiver reads
// back, such as a trace context: the one hook that changes a message.
type Propagator interface {
	// Inject is called for each request (e.Kind Send) or reply (Reply)
	// before it is checked and sent, and before the Observer hears of it,
	// on the sending goroutine, with e as the Observer gets it. It may add
	// up to room message attributes to attrs (room is what SQS's 10 leave
	// beside the sender's own) and system attributes to sys, of which SQS
	// takes only AWSTraceHeader; what it adds is checked with the rest
	// before any call. It returns the context the Observer's event gets:
	// ctx, or one made from it (carrying a span that the event's done func
	// ends). A panic in it is recovered and logged, and ctx kept.
	Inject(ctx context.Context, e Event, attrs map[string]types.MessageAttributeValue, sys map[string]types.MessageSystemAttributeValue, room int) context.Context
}

// Func makes an Observer of a function.
type Func func(ctx context.Context, e Event) func(reply *types.Message, err error)

// Observe calls f.
func (f Func) Observe(ctx context.Context, e Event) func(*types.Message, error) {
	return f(ctx, e)
}

// Join returns an Observer that tells each of obs in turn, skipping nil
// ones, and calls their done funcs in the reverse order, as deferred
// calls run. It returns nil when no observer is left.
func Join(obs ...Observer) Observer {
	var js joined
	for _, o := range obs {
		switch o := o.(type) {
		case nil:
		case joined:
			js = append(js, o...)
		default:
			js = append(js, o)
		}
	}
	switch len(js) {
	case 0:
		return nil
	case 1:
		return js[0]
	}
	return js
}

type joined []Observer

func (js joined) Observe(ctx context.Context, e Event) func(*types.Message, error) {
	var dones []func(*types.Message, error)
	for _, o := range js {
		if d := o.Observe(ctx, e); d != nil {
			dones = append(dones, d)
		}
	}
	if len(dones) == 0 {
		return nil
	}
	return func(reply *types.Message, err error) {
		for i := len(dones) - 1; i >= 0; i-- {
			dones[i](reply, err)
		}
	}
}
