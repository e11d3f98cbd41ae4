package sqstest

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
)

// This file is the direct state API: tests set up and inspect queues
// without going through the SDK, so that a test of a consumer need not also
// be a test of its producer, and an assertion can see what a receive would
// hide (in-flight messages and their receive counts).

// Message is a message as Seed takes it and Messages returns it.
//
// Where it stands follows from VisibleAt, ReceiveCount and the server's
// clock: visible (the next receive may return it) when VisibleAt is not
// after the server's now; otherwise hidden, in flight if ReceiveCount > 0
// and delayed if not.
type Message struct {
	// ID is the MessageId the server assigned; Seed ignores it.
	ID   string
	Body string
	// Attributes are the message attributes, as in SendMessageInput.
	Attributes map[string]types.MessageAttributeValue
	// GroupID and DeduplicationID are MessageGroupId and
	// MessageDeduplicationId; FIFO queues need a group, and a deduplication
	// id unless content-based deduplication is on.
	GroupID, DeduplicationID string
	// SentAt is when the message was sent. Zero in Seed means the server's
	// current time; an earlier time ages the message, for retention or
	// ApproximateAgeOfOldestMessage.
	SentAt time.Time
	// ReceiveCount is ApproximateReceiveCount: how many times the message
	// has been received.
	ReceiveCount int
	// VisibleAt is when the message becomes (or became) visible: the end of
	// a delay or of a visibility timeout. In Seed, a time after the
	// server's now hides the message: in flight if ReceiveCount > 0 (at
	// most 12 h ahead; its receipt handle is lost, as if its consumer
	// crashed), delayed otherwise (at most 15 min ahead). Zero means
	// visible now, after the queue's DelaySeconds for a message never
	// received.
	VisibleAt time.Time
}

// Seed adds messages to a queue, named by its URL or its name, as
// SendMessage calls would, with the same validation, FIFO ordering and
// deduplication (a duplicate within 5 minutes is dropped, as SQS drops it),
// and wakes parked receives. Unlike SendMessage it can also place a message
// in flight, delayed, received before, or sent in the past: see Message. It
// adds all the messages or, returning the first error, none.
func (s *Server) Seed(queue string, msgs ...Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, aerr := s.lookupState(queue)
	if aerr != nil {
		return fmt.Errorf("sqstest: Seed %q: %w", queue, aerr)
	}
	now := s.clock.now()
	built := make([]*message, len(msgs))
	for i := range msgs {
		m, err := s.seedMessage(q, &msgs[i], now)
		if err != nil {
			return fmt.Errorf("sqstest: Seed %q: message %d: %w", queue, i, err)
		}
		built[i] = m
	}
	woken := 0
	for _, m := range built {
		s.enqueue(q, m, now)
		if m.visible(now) {
			woken++
		}
	}
	q.wake(woken)
	if err := s.durable(); err != nil {
		return fmt.Errorf("sqstest: Seed %q: %w", queue, err)
	}
	return nil
}

// seedMessage validates one seeded message and builds it. Callers hold s.mu.
func (s *Server) seedMessage(q *queue, in *Message, now time.Time) (*message, error) {
	send := &api.SendMessageInput{MessageBody: aws.String(in.Body), MessageAttributes: toWireAttrs(in.Attributes)}
	if in.GroupID != "" {
		send.MessageGroupID = aws.String(in.GroupID)
	}
	if in.DeduplicationID != "" {
		send.MessageDeduplicationID = aws.String(in.DeduplicationID)
	}
	m, aerr := s.newMessage(q, send, now)
	if aerr != nil {
		return nil, aerr
	}
	switch {
	case in.ReceiveCount < 0:
		return nil, fmt.Errorf("ReceiveCount %d is negative", in.ReceiveCount)
	case in.SentAt.After(now):
		return nil, fmt.Errorf("SentAt %v is after the server's now, %v", in.SentAt, now)
	}
	if !in.SentAt.IsZero() {
		m.sentAt = in.SentAt
	}
	ahead := in.VisibleAt.Sub(now)
	if in.ReceiveCount > 0 {
		if ahead > maxVisibilitySeconds*time.Second {
			return nil, fmt.Errorf("VisibleAt is %v ahead, more than the 12 h visibility limit", ahead)
		}
		m.receives = in.ReceiveCount
		m.firstReceive, m.receivedAt = now, now
		m.visibleAt = now
		m.handle = newReceiptHandle(q, m)
	} else if ahead > maxDelay {
		return nil, fmt.Errorf("VisibleAt is %v ahead, more than the 15 min delay limit", ahead)
	}
	if !in.VisibleAt.IsZero() {
		m.visibleAt = in.VisibleAt
	}
	return m, nil
}

// maxDelay is SQS's limit on DelaySeconds.
const maxDelay = 900 * time.Second

// Messages returns a snapshot of a queue's messages, named by its URL or
// its name, in the order the server scans them for a receive (send order
// for FIFO queues), without receiving them: a receive's view plus what it
// hides (in-flight and delayed messages, receive counts, visibility
// deadlines). Messages past the retention period are dropped first, as a
// receive would drop them.
func (s *Server) Messages(queue string) ([]Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, aerr := s.lookupState(queue)
	if aerr != nil {
		return nil, fmt.Errorf("sqstest: Messages %q: %w", queue, aerr)
	}
	now := s.clock.now()
	var out []Message
	for _, m := range q.all() {
		if q.expired(m, now) {
			q.remove(m)
			continue
		}
		out = append(out, Message{
			ID: m.id, Body: m.body, Attributes: fromWireAttrs(m.attrs), GroupID: m.group, DeduplicationID: m.dedupID,
			SentAt: m.sentAt, ReceiveCount: m.receives, VisibleAt: m.visibleAt,
		})
	}
	return out, nil
}

// QueueURLs returns the URLs of every queue, sorted. For a server made by
// NewHandler, which has no URL of its own, they are paths
// ("/000000000000/jobs"), which the other methods accept as well.
func (s *Server) QueueURLs() []string {
	s.mu.Lock()
	names := make([]string, 0, len(s.queues))
	for n := range s.queues {
		names = append(names, n)
	}
	s.mu.Unlock()
	sort.Strings(names)
	for i, n := range names {
		names[i] = s.queueURL(s.url, n)
	}
	return names
}

// QueueAttributes returns every attribute of a queue, named by its URL or
// its name, as GetQueueAttributes with "All" does.
func (s *Server) QueueAttributes(queue string) (map[string]string, error) {
	out, err := s.getQueueAttributes(context.Background(), &api.GetQueueAttributesInput{QueueURL: stateURL(queue), AttributeNames: []string{"All"}})
	if err != nil {
		return nil, fmt.Errorf("sqstest: QueueAttributes %q: %w", queue, err)
	}
	return out.Attributes, nil
}

// QueueTags returns the tags of a queue, named by its URL or its name.
func (s *Server) QueueTags(queue string) (map[string]string, error) {
	out, err := s.listQueueTags(context.Background(), &api.QueueInput{QueueURL: stateURL(queue)})
	if err != nil {
		return nil, fmt.Errorf("sqstest: QueueTags %q: %w", queue, err)
	}
	return out.Tags, nil
}

func toWireAttrs(in map[string]types.MessageAttributeValue) map[string]api.AttrValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]api.AttrValue, len(in))
	for n, v := range in {
		w := api.AttrValue{DataType: aws.ToString(v.DataType), BinaryValue: bytes.Clone(v.BinaryValue)}
		if v.StringValue != nil {
			w.StringValue = aws.String(*v.StringValue)
		}
		w.StringListValues = append([]string(nil), v.StringListValues...)
		for _, b := range v.BinaryListValues {
			w.BinaryListValues = append(w.BinaryListValues, bytes.Clone(b))
		}
		out[n] = w
	}
	return out
}

func fromWireAttrs(in map[string]api.AttrValue) map[string]types.MessageAttributeValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]types.MessageAttributeValue, len(in))
	for n, w := range in {
		v := types.MessageAttributeValue{DataType: aws.String(w.DataType), BinaryValue: bytes.Clone(w.BinaryValue)}
		if w.StringValue != nil {
			v.StringValue = aws.String(*w.StringValue)
		}
		out[n] = v
	}
	return out
}
