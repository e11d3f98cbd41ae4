package responder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// ErrStreamNotRequested is returned by Request.Send for a request whose
// sender waits for one reply (a Java requester, or
// requester.SendMessageAndGetResponse): it would take whichever message
// came first, so only the handler's final Reply is sent.
var ErrStreamNotRequested = errors.New("responder: the requester takes one reply, not a stream")

// streamWindow bounds the messages of one stream sent and not yet
// acknowledged: two batch calls' worth, so that one batch fills while the
// other is in flight, and a handler faster than SQS waits in Send.
const streamWindow = 2 * wire.MaxBatchEntries

// finalMark marks a stream's final reply in its StreamAttribute; endMark
// the message that ends a stream whose handler returned no final Reply,
// which carries endBody and is no message of the stream.
const (
	finalMark = wire.MarkFinal
	endMark   = wire.MarkEnd
	endBody   = wire.EndBody
)

// replyStream is the sending side of a reply stream: the messages a
// handler sends through Request.Send before its final Reply.
type replyStream struct {
	r       *Responder
	req     *Request
	request types.Message
	origin  string // the request queue's URL when the request asked for it

	window chan struct{} // one token per message in flight
	wg     sync.WaitGroup

	mu    sync.Mutex
	seq   int   // the next sequence number
	err   error // the first failed send
	ended bool  // the handler returned: no more Sends

	queued []streamMessage // under turns.mu: built, not yet handed to sends
	age    uint64          // the stream's place in the order of their start

	// A session's reply stream sends below the credit its caller grants.
	asked     int           // the credit a session request granted, 0 for none
	askedEnd  bool          // the session request is the caller's only message
	askedIdle time.Duration // the session's idle timeout, 0 for none
	session   *session      // set once the session is open
	credit    int           // under mu: Send may send below this; 0 for no limit
	granted   chan struct{} // under mu: closed and replaced when credit grows
}

// streamMessage is a stream's message waiting for its turn.
type streamMessage struct {
	target string
	entry  types.SendMessageBatchRequestEntry
	sent   func(error) // reports the send to Options.Observer
}

// streamTurns hands the messages of a responder's streams to its send
// coalescer oldest stream first, keeping at most limit of them there
// (enough to fill every send call in flight and the next). When handlers
// send faster than SQS takes their messages, the coalescer's queue would
// otherwise hold every stream's window in the order the handlers ran, and
// each stream would get a batch, then wait for every other stream's: long
// gaps between its replies, and every stream finishing late. Oldest first,
// the streams that started first go out at the pace of their window (20
// messages in flight each) and finish, the later ones take what capacity
// is left and then their turn: the same replies per second, with short
// gaps, and each stream done as early as its place in line allows. It has
// no goroutine: Send and the send calls' callbacks move it along.
type streamTurns struct {
	r     *Responder
	limit int

	mu        sync.Mutex
	ages      atomic.Uint64  // streams started, for replyStream.age
	waiting   []*replyStream // streams with queued messages, oldest first
	submitted int            // handed to the coalescer, not yet answered
	pumping   bool           // a goroutine is in pump
	again     bool           // pump must look again before it stops
}

// add queues m as s's next message and moves the queue along.
func (t *streamTurns) add(s *replyStream, m streamMessage) {
	t.mu.Lock()
	if len(s.queued) == 0 {
		i, _ := slices.BinarySearchFunc(t.waiting, s.age, func(x *replyStream, age uint64) int { return cmp.Compare(x.age, age) })
		t.waiting = slices.Insert(t.waiting, i, s)
	}
	s.queued = append(s.queued, m)
	t.mu.Unlock()
	t.pump()
}

// pump hands queued messages to the coalescer, oldest stream first, while
// there is room. One goroutine pumps at a time (others leave it a
// note), so that a Submit answered at once, after Close, cannot recurse.
func (t *streamTurns) pump() {
	t.mu.Lock()
	if t.pumping {
		t.again = true
		t.mu.Unlock()
		return
	}
	t.pumping = true
	var take []*replyStream
	var msgs []streamMessage
	for {
		take, msgs = take[:0], msgs[:0]
		for t.submitted < t.limit && len(t.waiting) > 0 {
			s := t.waiting[0]
			msgs = append(msgs, s.queued[0])
			take = append(take, s)
			if s.queued = s.queued[1:]; len(s.queued) == 0 {
				s.queued = nil
				t.waiting = t.waiting[1:]
			}
			t.submitted++
		}
		if len(take) == 0 && !t.again {
			t.pumping = false
			t.mu.Unlock()
			return
		}
		t.again = false
		t.mu.Unlock()
		for i, s := range take {
			s.submit(msgs[i])
		}
		t.mu.Lock()
	}
}

// done notes that a message handed to the coalescer was answered.
func (t *streamTurns) done() {
	t.mu.Lock()
	t.submitted--
	t.mu.Unlock()
	t.pump()
}

// Send sends msg to the requester as the next message of the request's
// reply stream, before the handler's final Reply ends it. The requester
// gets the messages in the order of the Send calls, each once. Send
// returns once the message is queued for a batch call that it shares with
// other streams' messages; a failure to send it is returned by a later Send
// and fails the request (it is redelivered, and the requester drops the
// messages it has seen again). At most 20 messages per stream are in
// flight: beyond that Send waits, or returns ctx's error.
//
// Errors: ErrStreamNotRequested when the requester takes only one reply
// (nothing is sent; return everything in the final Reply);
// ErrNoResponseRequested when it takes none; an *sqsapi.InvalidInputError
// for a message that breaks SQS's limits (a streamed message carries at
// most 7 attributes of its own); ErrResponseQueueGone once the requester is
// gone; sqsapi.ErrClosed after the handler returned.
func (r *Request) Send(ctx context.Context, msg *Reply) error {
	if r.stream == nil {
		if !r.ResponseRequested() {
			return ErrNoResponseRequested
		}
		return ErrStreamNotRequested
	}
	return r.stream.send(ctx, msg)
}

// newReplyStream returns the stream of a request that asked for one, or
// nil.
func (r *Responder) newReplyStream(req *Request) *replyStream {
	v, ok := req.Message.MessageAttributes[sqsapi.StreamAttribute]
	if !ok || !req.ResponseRequested() {
		return nil
	}
	s := &replyStream{r: r, req: req, request: req.Message, origin: originOf(req), window: make(chan struct{}, streamWindow), age: r.turns.ages.Add(1)}
	if a, ok := wire.ParseSessionRequest(aws.ToString(v.StringValue)); ok {
		s.asked, s.askedEnd, s.askedIdle = a.Credit, a.End, a.Idle
		if s.asked == 0 {
			s.asked = sessionWindow
		}
	}
	return s
}

// opened makes s the reply stream of sess, bounded by the credit its
// caller granted in the request.
func (s *replyStream) opened(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session = sess
	s.credit = s.asked
	s.granted = make(chan struct{})
}

// unopened lifts the credit of a session's reply stream whose open
// message failed to go: its caller cannot grant more.
func (s *replyStream) unopened() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.credit = 0
	close(s.granted)
	s.granted = make(chan struct{})
}

// grant raises the credit of a session's reply stream.
func (s *replyStream) grant(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.credit > 0 && n > s.credit {
		s.credit = n
		close(s.granted)
		s.granted = make(chan struct{})
	}
}

// waitCredit waits until the caller of a session has room for the next
// reply.
func (s *replyStream) waitCredit(ctx context.Context) error {
	s.mu.Lock()
	for s.credit > 0 && s.seq >= s.credit && s.stateErrLocked() == nil {
		granted := s.granted
		s.mu.Unlock()
		var gone <-chan struct{}
		if s.session != nil {
			gone = s.session.goneCh()
		}
		select {
		case <-granted:
		case <-gone:
			return s.session.callerGone()
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
	}
	s.mu.Unlock()
	return nil
}

func (s *replyStream) send(ctx context.Context, msg *Reply) error {
	if s.req.session != nil {
		// A session opens when its handler first streams, before the
		// reply goes: the caller may stop the handler from then on. When
		// it cannot open (logged), the replies go as a plain stream.
		if err := s.req.session.open(ctx); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if err := s.waitCredit(ctx); err != nil {
		return err
	}
	select {
	case s.window <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	msg, sent := s.r.onReply(ctx, s.req, msg) // outside the lock: user code
	// A message too large even compressed goes to Options.PayloadStore,
	// if set, outside the lock: the store's call may take long.
	more := map[string]string{sqsapi.StreamAttribute: "0"} // its place; attributes adds the credit
	if s.origin != "" {
		more[sqsapi.OriginAttribute] = s.origin
	}
	msg, object, err := s.r.offloadStreamed(ctx, s.request, msg, more, s.r.compresses(s.req))
	if err != nil {
		<-s.window
		sent(err)
		return err
	}
	s.mu.Lock()
	if err := s.stateErrLocked(); err != nil {
		s.mu.Unlock()
		<-s.window
		s.r.dropObject(object)
		sent(err)
		return err
	}
	target, entry, err := buildReply(s.request, msg, s.attributes(s.seq, ""), s.r.compresses(s.req))
	if err != nil {
		s.mu.Unlock()
		<-s.window
		s.r.dropObject(object)
		sent(err)
		return err
	}
	if _, virtual := entry.MessageAttributes[sqsapi.VirtualQueueNameAttribute]; virtual {
		// The reply queue is the request's own virtual queue, whose name
		// says whose message it is: the correlation id would only cost
		// every message its bytes and its checksum work. The final reply
		// keeps it, for a requester that takes one reply; a stream to a
		// real queue keeps it too, where it may be all that tells streams
		// apart.
		delete(entry.MessageAttributes, sqsapi.CorrelationIDAttribute)
	}
	s.seq++
	s.wg.Add(1)
	s.mu.Unlock()
	if s.session != nil {
		s.session.noteSent()
	}
	s.r.turns.add(s, streamMessage{target, entry, sent})
	return nil
}

// submit hands m to the responder's send coalescer, its turn come. A
// session's caller waits for each reply (a ping-pong exchange, say), so
// its messages go as urgent ones, which do not wait for a call in flight
// when they come sparse.
func (s *replyStream) submit(m streamMessage) {
	submit := s.r.sends.Submit
	if s.session != nil {
		submit = s.r.sends.SubmitUrgent
	}
	submit(m.target, m.entry, func(_ types.SendMessageBatchResultEntry, err error) {
		defer s.wg.Done()
		<-s.window
		err = s.r.replyResult(context.Background(), s.request, m.target, err)
		m.sent(err)
		if err != nil {
			s.mu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.mu.Unlock()
		}
		s.r.turns.done()
	})
}

func (s *replyStream) stateErrLocked() error {
	switch {
	case s.ended:
		return fmt.Errorf("responder: Send after the handler returned: %w", sqsapi.ErrClosed)
	case s.err != nil:
		return s.err
	}
	return nil
}

// attributes are the responder's own attributes of message seq, whose
// stream attribute ends with mark.
func (s *replyStream) attributes(seq int, mark string) map[string]string {
	pos := wire.StreamPos{Seq: seq, Mark: mark}
	if s.session != nil {
		pos.Credit = s.session.piggyback()
	}
	more := map[string]string{sqsapi.StreamAttribute: wire.FormatStream(pos)}
	if s.origin != "" {
		more[sqsapi.OriginAttribute] = s.origin
	}
	return more
}

// end stops Sends and returns the final message of the stream with its
// attributes: the handler's reply, or when it returned none, the end mark,
// so that the requester does not wait for a final reply until its deadline.
// SQS takes no empty message, so the end mark has a fixed body, which the
// requester never returns.
func (s *replyStream) end(reply *Reply) (*Reply, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	if reply == nil {
		return &Reply{Body: endBody}, s.attributes(s.seq, endMark)
	}
	return reply, s.attributes(s.seq, finalMark)
}

// storedEnd returns what the Store keeps as the answer of a stream whose
// handler returned no reply: the end mark end built, its attributes
// included, so that a replay from the Store sends the requester the same
// end mark (with the same sequence number) as the first run. A nil stored
// reply would send nothing, and the requester's stream would wait for its
// deadline.
func storedEnd(final *Reply, more map[string]string) *Reply {
	attrs := make(map[string]types.MessageAttributeValue, len(more))
	for name, v := range more {
		attrs[name] = wire.StringAttribute(v)
	}
	return &Reply{Body: final.Body, Attributes: attrs}
}

// isStoredEnd reports whether reply, stored as the answer of req, is a
// stream's end mark (storedEnd): the replay sends it as it is, as the first
// run sent it, and not through Options.Observer.
func isStoredEnd(req *Request, reply *Reply) bool {
	if req.stream == nil || reply == nil || reply.Body != endBody {
		return false
	}
	v, found := reply.Attributes[sqsapi.StreamAttribute]
	pos, ok := wire.ParseStream(aws.ToString(v.StringValue))
	return found && ok && pos.Mark == endMark
}

// wait waits for the stream's messages to be sent and returns the first
// failure, or ctx's error.
func (s *replyStream) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// originOf is the origin a reply to req reports, when req asks for one.
func originOf(req *Request) string {
	if _, ok := req.Message.MessageAttributes[sqsapi.OriginAttribute]; ok {
		return req.QueueURL
	}
	return ""
}
