package sqstest

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
	"github.com/tempqueues/tempqueues/sqstest/internal/journal"
)

// queue is one SQS queue. Every field is guarded by Server.mu.
type queue struct {
	name     string
	arn      string
	fifo     bool
	created  time.Time
	modified time.Time

	attrs   map[string]string // settable attributes, canonical form, defaults included
	redrive *redrivePolicy
	tags    map[string]string

	// Messages in a doubly linked list. FIFO queues keep send order;
	// standard queues move a message to the tail when it is received, which
	// keeps visible messages near the head so a receive scans little.
	head, tail *message
	hidden     hiddenHeap // standard queues' hidden messages; see store.go
	order      uint64     // placements, for message.order
	byID       map[string]*message
	seq        uint64 // last SequenceNumber (FIFO) or send counter

	dedup     map[string]dedupEntry // FIFO deduplication window
	lastPrune time.Time

	waiters []*waiter // parked long polls, oldest first
	// timer wakes waiters when the earliest delayed or in-flight message
	// becomes visible; armed only while waiters exist.
	timer   alarm
	timerAt time.Time
	deleted bool

	moveTasks []*moveTask // StartMessageMoveTask's, with this queue as source; oldest first
}

func (q *queue) intAttr(name string) int {
	n, _ := strconv.Atoi(q.attrs[name])
	return n
}

func (q *queue) boolAttr(name string) bool { return q.attrs[name] == "true" }

func (s *Server) queueURL(base, name string) string {
	return base + "/" + s.opts.AccountID + "/" + name
}

func (s *Server) queueARN(name string) string {
	return "arn:aws:sqs:" + s.opts.Region + ":" + s.opts.AccountID + ":" + name
}

// lookup returns the live queue a QueueUrl names. It must be a URL,
// http(s)://host/<account>/<name>, as SQS requires (a bare queue name is
// InvalidAddress there too), but only the name is compared: the host
// differs between clients (and the SDK always posts to its BaseEndpoint),
// as does the account id in tests. Callers hold s.mu.
func (s *Server) lookup(rawURL string) (*queue, *api.Error) {
	if rawURL == "" {
		return nil, api.MissingParameter("QueueUrl")
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, api.NewError(http.StatusNotFound, "InvalidAddress", "The address %s is not valid for this endpoint.", rawURL)
	}
	return s.lookupPath(u)
}

// lookupPath finds the queue a URL's path names: /<account>/<name>.
func (s *Server) lookupPath(u *url.URL) (*queue, *api.Error) {
	if u.Fragment != "" {
		// A virtual queue URL (host#name) reaching the server is a bug in
		// the caller, and AWS would not find such a queue either.
		return nil, api.QueueDoesNotExist()
	}
	name := u.Path[strings.LastIndexByte(u.Path, '/')+1:]
	q := s.queues[name]
	if q == nil {
		return nil, api.QueueDoesNotExist()
	}
	return q, nil
}

// lookupState is lookup for the state API, which also takes a queue's
// name or a URL's path. Callers hold s.mu.
func (s *Server) lookupState(queue string) (*queue, *api.Error) {
	if strings.Contains(queue, "://") {
		return s.lookup(queue)
	}
	if queue == "" {
		return nil, api.MissingParameter("QueueUrl")
	}
	return s.lookupPath(&url.URL{Path: queue})
}

// stateURL turns what the state API takes (a URL, a path or a name) into
// a QueueUrl the API accepts.
func stateURL(queue string) string {
	if queue == "" || strings.Contains(queue, "://") {
		return queue
	}
	return "http://sqstest/000000000000/" + queue[strings.LastIndexByte(queue, '/')+1:]
}

// queueByARN returns the live queue with that ARN, or nil.
func (s *Server) queueByARN(arn string) *queue {
	name := arn[strings.LastIndexByte(arn, ':')+1:]
	if q := s.queues[name]; q != nil && q.arn == arn {
		return q
	}
	return nil
}

// validQueueName applies SQS's queue naming rule as the server does: 1 to
// 80 characters of A-Z, a-z, 0-9, '-' and '_', a FIFO queue's ".fifo"
// counted in the 80. (The clients' copy, internal/wire's, sits a layer
// above this package; TestQueueNameRuleAgreesWithTheClients holds the two
// together.)
func validQueueName(name string) bool {
	base := strings.TrimSuffix(name, ".fifo")
	if len(name) > 80 || base == "" {
		return false
	}
	for _, c := range []byte(base) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func (s *Server) createQueue(base string, in *api.CreateQueueInput) (*api.QueueURLOutput, error) {
	name := in.QueueName
	if name == "" {
		return nil, api.MissingParameter("QueueName")
	}
	if !validQueueName(name) {
		return nil, api.InvalidParameter("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	fifo := strings.HasSuffix(name, ".fifo")
	if v, ok := in.Attributes[attrFifo]; ok {
		if b, _ := parseBool(v); b && !fifo {
			return nil, api.InvalidParameter("The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.")
		}
	} else if fifo {
		return nil, api.InvalidParameter("The name of a non-FIFO queue must not end with .fifo; set the attribute FifoQueue=true for a FIFO queue.")
	}
	attrs, aerr := normalizeAttributes(in.Attributes, fifo, true)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := validateTags(in.Tags); aerr != nil {
		return nil, aerr
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[name]; q != nil {
		// Same name: SQS returns the existing URL if every attribute given
		// matches; tags are not compared.
		for k, v := range attrs {
			if q.attrs[k] != v {
				return nil, api.SenderError("QueueNameExists", "A queue already exists with the same name and a different value for attribute %s", k)
			}
		}
		return &api.QueueURLOutput{QueueURL: s.queueURL(base, name)}, nil
	}
	redrive, aerr := s.checkRedrive(attrs[attrRedrive], fifo)
	if aerr != nil {
		return nil, aerr
	}
	now := s.clock.now()
	q := &queue{
		name:     name,
		arn:      s.queueARN(name),
		fifo:     fifo,
		created:  now,
		modified: now,
		attrs: map[string]string{
			attrVisibility: strconv.Itoa(defaultVisibility),
			attrMaxSize:    strconv.Itoa(defaultMaxSize),
			attrRetention:  strconv.Itoa(defaultRetention),
			attrDelay:      "0",
			attrWait:       "0",
			attrSSE:        "true",
		},
		redrive: redrive,
		tags:    make(map[string]string, len(in.Tags)),
		byID:    make(map[string]*message),
	}
	if fifo {
		q.attrs[attrFifo] = "true"
		q.attrs[attrContentDedup] = "false"
		q.attrs[attrDedupScope] = "queue"
		q.attrs[attrThroughput] = "perQueue"
		q.dedup = make(map[string]dedupEntry)
	}
	for k, v := range attrs {
		q.attrs[k] = v
	}
	if v, ok := q.attrs[attrRedrive]; ok && v == "" {
		delete(q.attrs, attrRedrive)
	}
	for k, v := range in.Tags {
		q.tags[k] = v
	}
	s.queues[name] = q
	s.journalQueue(q)
	return &api.QueueURLOutput{QueueURL: s.queueURL(base, name)}, nil
}

// checkRedrive parses a canonical RedrivePolicy and checks that its target
// exists and is of the same kind. Callers hold s.mu.
func (s *Server) checkRedrive(v string, fifo bool) (*redrivePolicy, *api.Error) {
	if v == "" {
		return nil, nil
	}
	p, err := parseRedrivePolicy(v)
	if err != nil {
		return nil, err
	}
	dlq := s.queueByARN(p.targetARN)
	if dlq == nil {
		return nil, api.InvalidParameter("Value %s for parameter RedrivePolicy is invalid. Reason: Dead letter target does not exist.", v)
	}
	if dlq.fifo != fifo {
		return nil, api.InvalidParameter("Value %s for parameter RedrivePolicy is invalid. Reason: Dead-letter queue must be the same type of queue as the source.", v)
	}
	return p, nil
}

func validateTags(tags map[string]string) *api.Error {
	if len(tags) > 50 {
		return api.InvalidParameter("Too many tags: at most 50 are allowed.")
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 || len(v) > 256 {
			return api.InvalidParameter("Tag keys must have 1 to 128 characters and values at most 256.")
		}
	}
	return nil
}

func (s *Server) getQueueURL(base string, in *api.GetQueueURLInput) (*api.QueueURLOutput, error) {
	if in.QueueName == "" {
		return nil, api.MissingParameter("QueueName")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queues[in.QueueName] == nil {
		return nil, api.QueueDoesNotExist()
	}
	return &api.QueueURLOutput{QueueURL: s.queueURL(base, in.QueueName)}, nil
}

// page applies MaxResults/NextToken to sorted names. NextToken is the
// last name of the previous page, so pages stay consistent when queues come
// and go between calls.
func page(names []string, nextToken string, maxResults *int) ([]string, string, *api.Error) {
	limit := 1000
	if maxResults != nil {
		if *maxResults < 1 || *maxResults > 1000 {
			return nil, "", api.InvalidParameter("Value %d for parameter MaxResults is invalid. Reason: must be between 1 and 1000.", *maxResults)
		}
		limit = *maxResults
	}
	start := 0
	if nextToken != "" {
		after, err := base64.RawURLEncoding.DecodeString(nextToken)
		if err != nil {
			return nil, "", api.InvalidParameter("Invalid NextToken value.")
		}
		start = sort.SearchStrings(names, string(after)+"\x00")
	}
	names = names[start:]
	if len(names) <= limit {
		return names, "", nil
	}
	names = names[:limit]
	if maxResults == nil {
		return names, "", nil // without MaxResults SQS returns 1,000 and no token
	}
	return names, base64.RawURLEncoding.EncodeToString([]byte(names[len(names)-1])), nil
}

func (s *Server) listQueues(base string, in *api.ListQueuesInput) (*api.ListQueuesOutput, error) {
	s.mu.Lock()
	var names []string
	for name := range s.queues {
		if strings.HasPrefix(name, in.QueueNamePrefix) {
			names = append(names, name)
		}
	}
	s.mu.Unlock()
	sort.Strings(names)
	names, next, err := page(names, in.NextToken, in.MaxResults)
	if err != nil {
		return nil, err
	}
	out := &api.ListQueuesOutput{NextToken: next}
	for _, n := range names {
		out.QueueURLs = append(out.QueueURLs, s.queueURL(base, n))
	}
	return out, nil
}

func (s *Server) deleteQueue(_ context.Context, in *api.QueueInput) (*api.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	delete(s.queues, q.name)
	s.journalAdd(&journal.Record{T: "dq", Q: q.name})
	q.deleted = true
	q.wake(len(q.waiters)) // they answer QueueDoesNotExist
	q.stopTimer()
	return &api.Empty{}, nil
}

func (s *Server) getQueueAttributes(_ context.Context, in *api.GetQueueAttributesInput) (*api.AttributesOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	want := make(map[string]bool)
	for _, n := range in.AttributeNames {
		switch {
		case n == "All":
			for _, a := range allAttributeNames {
				want[a] = true
			}
		case knownAttribute(n):
			want[n] = true
		default:
			return nil, api.SenderError("InvalidAttributeName", "Unknown Attribute %s.", n)
		}
	}
	out := make(map[string]string)
	for n := range want {
		if v, ok := q.attrs[n]; ok {
			out[n] = v
		}
	}
	if want[attrArn] {
		out[attrArn] = q.arn
	}
	if want[attrCreated] {
		out[attrCreated] = strconv.FormatInt(q.created.Unix(), 10)
	}
	if want[attrLastModified] {
		out[attrLastModified] = strconv.FormatInt(q.modified.Unix(), 10)
	}
	if want[attrNumVisible] || want[attrNumNotVisible] || want[attrNumDelayed] {
		c := s.count(q, s.clock.now())
		for n, v := range map[string]int{attrNumVisible: c.visible, attrNumNotVisible: c.inflight, attrNumDelayed: c.delayed} {
			if want[n] {
				out[n] = strconv.Itoa(v)
			}
		}
	}
	return &api.AttributesOutput{Attributes: out}, nil
}

func (s *Server) setQueueAttributes(_ context.Context, in *api.SetQueueAttributesInput) (*api.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	attrs, aerr := normalizeAttributes(in.Attributes, q.fifo, false)
	if aerr != nil {
		return nil, aerr
	}
	redrive := q.redrive
	if v, ok := attrs[attrRedrive]; ok {
		if redrive, aerr = s.checkRedrive(v, q.fifo); aerr != nil {
			return nil, aerr
		}
	}
	for k, v := range attrs {
		if k == attrRedrive && v == "" {
			delete(q.attrs, k)
			continue
		}
		q.attrs[k] = v
	}
	q.redrive = redrive
	q.modified = s.clock.now()
	s.journalQueue(q)
	// A shorter ReceiveMessageWaitTimeSeconds does not affect parked polls,
	// as on AWS; other changes take effect at the next receive.
	return &api.Empty{}, nil
}

func (s *Server) tagQueue(_ context.Context, in *api.TagQueueInput) (*api.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	if len(in.Tags) == 0 {
		return nil, api.MissingParameter("Tags")
	}
	merged := make(map[string]string, len(q.tags)+len(in.Tags))
	for k, v := range q.tags {
		merged[k] = v
	}
	for k, v := range in.Tags {
		merged[k] = v
	}
	if aerr := validateTags(merged); aerr != nil {
		return nil, aerr
	}
	q.tags = merged
	s.journalQueue(q)
	return &api.Empty{}, nil
}

func (s *Server) untagQueue(_ context.Context, in *api.UntagQueueInput) (*api.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	if len(in.TagKeys) == 0 {
		return nil, api.MissingParameter("TagKeys")
	}
	for _, k := range in.TagKeys {
		delete(q.tags, k)
	}
	s.journalQueue(q)
	return &api.Empty{}, nil
}

func (s *Server) listQueueTags(_ context.Context, in *api.QueueInput) (*api.ListQueueTagsOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	out := &api.ListQueueTagsOutput{Tags: make(map[string]string, len(q.tags))}
	for k, v := range q.tags {
		out.Tags[k] = v
	}
	return out, nil
}

// purgeQueue empties the queue at once, in-flight messages included. AWS
// allows one purge per 60 s and may take that long; see the package doc.
func (s *Server) purgeQueue(_ context.Context, in *api.QueueInput) (*api.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		return nil, err
	}
	q.clear()
	s.journalAdd(&journal.Record{T: "pq", Q: q.name})
	return &api.Empty{}, nil
}

func (s *Server) listDeadLetterSourceQueues(base string, in *api.ListDLQSourcesInput) (*api.ListDLQSourcesOutput, error) {
	s.mu.Lock()
	q, err := s.lookup(in.QueueURL)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	var names []string
	for _, src := range s.queues {
		if src.redrive != nil && src.redrive.targetARN == q.arn {
			names = append(names, src.name)
		}
	}
	s.mu.Unlock()
	sort.Strings(names)
	names, next, err := page(names, in.NextToken, in.MaxResults)
	if err != nil {
		return nil, err
	}
	out := &api.ListDLQSourcesOutput{QueueURLs: []string{}, NextToken: next}
	for _, n := range names {
		out.QueueURLs = append(out.QueueURLs, s.queueURL(base, n))
	}
	return out, nil
}
