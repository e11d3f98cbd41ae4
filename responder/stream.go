package responder

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

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
const streamWindow = 2 * sqsapi.MaxBatchEntries

// finalMark ends the value of the StreamAttribute on a stream's last reply.
const finalMark = ";final"

// replyStream is the sending side of a reply stream: the messages a
// handler sends through Request.Send before its final Reply.
type replyStream struct {
	r       *Responder
	request types.Message
	origin  string // the request queue's URL when the request asked for it

	window chan struct{} // one token per message in flight
	wg     sync.WaitGroup

	mu    sync.Mutex
	seq   int   // the next sequence number
	err   error // the first failed send
	ended bool  // the handler returned: no more Sends
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
// gone; ErrClosed after the handler returned.
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
	if _, ok := req.Message.MessageAttributes[sqsapi.StreamAttribute]; !ok || !req.ResponseRequested() {
		return nil
	}
	return &replyStream{r: r, request: req.Message, origin: originOf(req), window: make(chan struct{}, streamWindow)}
}

func (s *replyStream) send(ctx context.Context, msg *Reply) error {
	select {
	case s.window <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	if err := s.stateErrLocked(); err != nil {
		s.mu.Unlock()
		<-s.window
		return err
	}
	target, entry, err := buildReplyWith(s.request, msg, s.attributes(s.seq, false))
	if err != nil {
		s.mu.Unlock()
		<-s.window
		return err
	}
	s.seq++
	s.wg.Add(1)
	s.mu.Unlock()
	s.r.sends.Submit(target, entry, func(_ types.SendMessageBatchResultEntry, err error) {
		defer s.wg.Done()
		<-s.window
		if err = s.r.replyResult(context.Background(), s.request, target, err); err != nil {
			s.mu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.mu.Unlock()
		}
	})
	return nil
}

func (s *replyStream) stateErrLocked() error {
	switch {
	case s.ended:
		return fmt.Errorf("responder: Send after the handler returned: %w", ErrClosed)
	case s.err != nil:
		return s.err
	}
	return nil
}

// attributes are the responder's own attributes of message seq.
func (s *replyStream) attributes(seq int, final bool) map[string]string {
	v := strconv.Itoa(seq)
	if final {
		v += finalMark
	}
	more := map[string]string{sqsapi.StreamAttribute: v}
	if s.origin != "" {
		more[sqsapi.OriginAttribute] = s.origin
	}
	return more
}

// end stops Sends and returns the attributes of the final reply.
func (s *replyStream) end() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	return s.attributes(s.seq, true)
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

// buildReplyWith is buildReply for a reply that carries more attributes
// of the responder's own (a stream's sequence number, an origin): they are
// checked against SQS's limits with the rest, before any call.
func buildReplyWith(request types.Message, reply *Reply, more map[string]string) (string, types.SendMessageBatchRequestEntry, error) {
	if reply != nil {
		for name := range more {
			if _, taken := reply.Attributes[name]; taken {
				return "", types.SendMessageBatchRequestEntry{}, wire.Invalid(opSendResponse, "MessageAttributes", "attribute %q is set by the responder", name)
			}
		}
	}
	target, entry, err := buildReply(request, reply)
	if err != nil || len(more) == 0 {
		return target, entry, err
	}
	if n := len(entry.MessageAttributes) + len(more); n > sqsapi.MaxMessageAttributes {
		return "", entry, wire.Invalid(opSendResponse, "MessageAttributes", "%d attributes plus %d added by tempqueues exceed the SQS limit of %d",
			len(reply.Attributes), n-len(reply.Attributes), sqsapi.MaxMessageAttributes)
	}
	for name, v := range more {
		entry.MessageAttributes[name] = wire.StringAttribute(v)
	}
	if err := wire.CheckMessageSize(opSendResponse, entry.MessageBody, entry.MessageAttributes); err != nil {
		return "", entry, err
	}
	return target, entry, nil
}
