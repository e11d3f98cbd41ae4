package sqstest

import (
	"context"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
)

// message is one message in a queue. Fields are guarded by Server.mu.
//
// Its state is derived from the clock rather than stored, so that a
// Clock advance needs no bookkeeping: visible when visibleAt is not
// after now, otherwise delayed if never received and in flight if received.
type message struct {
	id        string
	body      string
	md5Body   string
	attrs     map[string]api.AttrValue
	traceHdr  string // AWSTraceHeader system attribute
	sentAt    time.Time
	visibleAt time.Time

	receives     int
	firstReceive time.Time
	receivedAt   time.Time // latest receive: the 12 h visibility cap counts from it
	handle       string    // latest receipt handle

	group, dedupID, seqNum string
	dlqSourceARN           string // set when moved to a dead-letter queue

	prev, next *message
	hidx       int    // index + 1 in the queue's hidden heap; 0 in the list
	order      uint64 // when placed in the queue, for Messages' order
}

func (m *message) visible(now time.Time) bool  { return !m.visibleAt.After(now) }
func (m *message) inFlight(now time.Time) bool { return m.receives > 0 && m.visibleAt.After(now) }

// push appends m to the queue's list.
func (q *queue) push(m *message) {
	m.prev, m.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = m
	} else {
		q.head = m
	}
	q.tail = m
	q.byID[m.id] = m
}

// unlink removes m from the list but not from byID.
func (q *queue) unlink(m *message) {
	if m.prev != nil {
		m.prev.next = m.next
	} else {
		q.head = m.next
	}
	if m.next != nil {
		m.next.prev = m.prev
	} else {
		q.tail = m.prev
	}
	m.prev, m.next = nil, nil
}

func (q *queue) remove(m *message) {
	q.detach(m)
	delete(q.byID, m.id)
}

// expired reports whether m has outlived the queue's retention period.
func (q *queue) expired(m *message, now time.Time) bool {
	return now.Sub(m.sentAt) >= time.Duration(q.intAttr(attrRetention))*time.Second
}

type counts struct{ visible, inflight, delayed int }

// count computes the exact approximate counts, dropping expired messages.
func (s *Server) count(q *queue, now time.Time) counts {
	var c counts
	var expired []*message
	q.each(func(m *message) {
		switch {
		case q.expired(m, now):
			expired = append(expired, m)
		case m.visible(now):
			c.visible++
		case m.receives > 0:
			c.inflight++
		default:
			c.delayed++
		}
	})
	for _, m := range expired {
		q.remove(m)
	}
	return c
}

var (
	attrNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,256}$`)
	batchIDRE  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
	numberRE   = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)
	dedupIDRE  = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)
)

const errNotValid = "The request include parameter that is not valid for this queue type"

// validChars reports whether s holds only characters SQS accepts in a
// message: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
func validChars(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return false
		}
		switch {
		case r == 0x9, r == 0xA, r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
		i += size
	}
	return true
}

// validateAttributes checks message attributes and returns their size as
// SQS counts it (name + data type + value).
func validateAttributes(attrs map[string]api.AttrValue) (int, *api.Error) {
	if len(attrs) > 10 {
		return 0, api.InvalidParameter("Number of message attributes [%d] exceeds the allowed maximum [10].", len(attrs))
	}
	size := 0
	for name, v := range attrs {
		lower := strings.ToLower(name)
		if !attrNameRE.MatchString(name) || strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon.") ||
			strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
			return 0, api.InvalidParameter("Message attribute name '%s' is invalid.", name)
		}
		base, custom, _ := strings.Cut(v.DataType, ".")
		if v.DataType == "" {
			return 0, api.InvalidParameter("The message attribute '%s' must contain non-empty message attribute type.", name)
		}
		if len(v.DataType) > 256 || (strings.Contains(v.DataType, ".") && custom == "") {
			return 0, api.InvalidParameter("The message attribute '%s' has an invalid message attribute type.", name)
		}
		switch base {
		case "String", "Number":
			if v.StringValue == nil || *v.StringValue == "" {
				return 0, api.InvalidParameter("The message attribute '%s' must contain non-empty message attribute value for message attribute type '%s'.", name, v.DataType)
			}
			if !validChars(*v.StringValue) {
				return 0, api.SenderError("InvalidMessageContents", "Invalid characters found in the value of message attribute '%s'.", name)
			}
			if base == "Number" && !numberRE.MatchString(*v.StringValue) {
				return 0, api.InvalidParameter("Can't cast the value of message (user) attribute '%s' to a number.", name)
			}
			size += len(*v.StringValue)
		case "Binary":
			if len(v.BinaryValue) == 0 {
				return 0, api.InvalidParameter("The message attribute '%s' must contain non-empty message attribute value for message attribute type '%s'.", name, v.DataType)
			}
			size += len(v.BinaryValue)
		default:
			return 0, api.InvalidParameter("The type of message (user) attribute '%s' is invalid. You must use only the following supported type prefixes: Binary, Number, String.", name)
		}
		if len(v.StringListValues) > 0 || len(v.BinaryListValues) > 0 {
			return 0, api.InvalidParameter("Message attribute list values in SendMessage operation are not supported.")
		}
		size += len(name) + len(v.DataType)
	}
	return size, nil
}

// newMessage validates a send for q and builds the message. It does not
// enqueue it. Callers hold s.mu.
func (s *Server) newMessage(q *queue, in *api.SendMessageInput, now time.Time) (*message, *api.Error) {
	if in.MessageBody == nil || *in.MessageBody == "" {
		return nil, api.MissingParameter("MessageBody")
	}
	body := *in.MessageBody
	if !validChars(body) {
		return nil, api.SenderError("InvalidMessageContents", "Invalid binary character in the message body; see the allowed characters in the SQS documentation.")
	}
	attrSize, err := validateAttributes(in.MessageAttributes)
	if err != nil {
		return nil, err
	}
	if max := q.intAttr(attrMaxSize); len(body)+attrSize > max {
		return nil, api.InvalidParameter("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", max)
	}
	delay := q.intAttr(attrDelay)
	if in.DelaySeconds != nil {
		d := *in.DelaySeconds
		if d < 0 || d > 900 {
			return nil, api.InvalidParameter("Value %d for parameter DelaySeconds is invalid. Reason: must be between 0 and 900, if provided.", d)
		}
		if q.fifo && d != 0 {
			return nil, api.InvalidParameter("Value %d for parameter DelaySeconds is invalid. Reason: %s.", d, errNotValid)
		}
		delay = d
	}
	m := &message{
		id:        uuid.NewString(),
		body:      body,
		md5Body:   md5Hex(body),
		attrs:     in.MessageAttributes,
		sentAt:    now,
		visibleAt: now.Add(time.Duration(delay) * time.Second),
	}
	if v, ok := in.MessageSystemAttributes["AWSTraceHeader"]; ok && v.StringValue != nil {
		m.traceHdr = *v.StringValue
	}
	if in.MessageGroupID != nil {
		if !dedupIDRE.MatchString(*in.MessageGroupID) {
			return nil, api.InvalidParameter("Value %s for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length.", *in.MessageGroupID)
		}
		m.group = *in.MessageGroupID
	}
	if in.MessageDeduplicationID != nil {
		if !q.fifo {
			return nil, api.InvalidParameter("Value %s for parameter MessageDeduplicationId is invalid. Reason: %s.", *in.MessageDeduplicationID, errNotValid)
		}
		if !dedupIDRE.MatchString(*in.MessageDeduplicationID) {
			return nil, api.InvalidParameter("Value %s for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId can only include alphanumeric and punctuation characters. 1 to 128 in length.", *in.MessageDeduplicationID)
		}
		m.dedupID = *in.MessageDeduplicationID
	}
	if q.fifo {
		if err := q.fifoCheck(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// enqueue adds a validated message to q, or, for a FIFO duplicate, returns
// the original. Callers hold s.mu and wake waiters afterwards.
func (s *Server) enqueue(q *queue, m *message, now time.Time) *api.SendMessageOutput {
	if q.fifo {
		if orig, dup := s.deduplicate(q, m, now); dup {
			return &api.SendMessageOutput{MessageID: orig.messageID, MD5OfMessageBody: m.md5Body,
				MD5OfMessageAttributes: md5OfAttributes(m.attrs), SequenceNumber: orig.seqNum}
		}
	}
	q.seq++
	if q.fifo {
		m.seqNum = seqString(q.seq)
	}
	q.insert(m, now)
	s.journalMessage(q, m)
	if m.visibleAt.After(now) {
		s.noteFuture(q, m.visibleAt, now)
	}
	out := &api.SendMessageOutput{MessageID: m.id, MD5OfMessageBody: m.md5Body,
		MD5OfMessageAttributes: md5OfAttributes(m.attrs), SequenceNumber: m.seqNum}
	if m.traceHdr != "" {
		out.MD5OfMessageSystemAttributes = md5OfAttributes(map[string]api.AttrValue{
			"AWSTraceHeader": {DataType: "String", StringValue: &m.traceHdr}})
	}
	return out
}

func (s *Server) sendMessage(_ context.Context, in *api.SendMessageInput) (*api.SendMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	now := s.clock.now()
	m, err := s.newMessage(q, in, now)
	if err != nil {
		return nil, err
	}
	out := s.enqueue(q, m, now)
	if m.visible(now) {
		q.wake(1)
	}
	return out, nil
}

// checkBatch applies the whole-request rules shared by the batch calls.
func checkBatch(ids []string) *api.Error {
	if len(ids) == 0 {
		return api.SenderError("EmptyBatchRequest", "There should be at least one entry in the request.")
	}
	if len(ids) > 10 {
		return api.SenderError("TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10. You have sent %d.", len(ids))
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !batchIDRE.MatchString(id) {
			return api.SenderError("InvalidBatchEntryId", "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
		}
		if seen[id] {
			return api.SenderError("BatchEntryIdsNotDistinct", "Id %s repeated.", id)
		}
		seen[id] = true
	}
	return nil
}

func failed(id string, e *api.Error) api.BatchError {
	return api.BatchError{ID: id, Code: e.Code, Message: e.Msg, SenderFault: e.Sender}
}

func (s *Server) sendMessageBatch(_ context.Context, in *api.SendMessageBatchInput) (*api.SendMessageBatchOutput, error) {
	ids := make([]string, len(in.Entries))
	total := 0
	for i, e := range in.Entries {
		ids[i] = e.ID
		if e.MessageBody != nil {
			total += len(*e.MessageBody)
		}
		for n, v := range e.MessageAttributes {
			total += len(n) + len(v.DataType) + len(v.BinaryValue)
			if v.StringValue != nil {
				total += len(*v.StringValue)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	if err := checkBatch(ids); err != nil {
		return nil, err
	}
	if total > defaultMaxSize {
		return nil, api.SenderError("BatchRequestTooLong", "Batch requests cannot be longer than %d bytes. You have sent %d bytes.", defaultMaxSize, total)
	}
	now := s.clock.now()
	out := &api.SendMessageBatchOutput{Successful: []api.SendBatchResult{}, Failed: []api.BatchError{}}
	woken := 0
	for i := range in.Entries {
		e := &in.Entries[i]
		e.QueueURL = in.QueueURL
		m, err := s.newMessage(q, &e.SendMessageInput, now)
		if err != nil {
			out.Failed = append(out.Failed, failed(e.ID, err))
			continue
		}
		res := s.enqueue(q, m, now)
		out.Successful = append(out.Successful, api.SendBatchResult{ID: e.ID, SendMessageOutput: *res})
		if m.visible(now) {
			woken++
		}
	}
	q.wake(woken)
	return out, nil
}
