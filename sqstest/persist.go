package sqstest

import (
	"maps"
	"sort"
	"strconv"
	"time"

	"github.com/tempqueues/tempqueues/sqstest/internal/journal"
)

// Persistence (Options.DataDir) journals every change to queues and
// messages as a journal.Record (package journal has the file, its group
// commit, compaction and the directory's lock). This file turns the
// server's state into records and records back into state.

// compactSlack is the growth beyond twice the last snapshot that starts an
// online compaction. Tests lower it.
var compactSlack int64 = 4 << 20

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func toMsgRecord(m *message) *journal.MsgRecord {
	r := new(journal.MsgRecord)
	m.record(r)
	return r
}

// record fills r with m's state.
func (m *message) record(r *journal.MsgRecord) {
	*r = journal.MsgRecord{ID: m.id, Body: m.body, Attrs: m.attrs, Trace: m.traceHdr, Sent: nanos(m.sentAt),
		Vis: nanos(m.visibleAt), RC: m.receives, First: nanos(m.firstReceive), Recv: nanos(m.receivedAt),
		H: m.handle, Group: m.group, Dedup: m.dedupID, Seq: m.seqNum, DLQ: m.dlqSourceARN}
}

func fromMsgRecord(r *journal.MsgRecord) *message {
	return &message{id: r.ID, body: r.Body, md5Body: md5Hex(r.Body), attrs: r.Attrs, traceHdr: r.Trace,
		sentAt: fromNanos(r.Sent), visibleAt: fromNanos(r.Vis), receives: r.RC, firstReceive: fromNanos(r.First),
		receivedAt: fromNanos(r.Recv), handle: r.H, group: r.Group, dedupID: r.Dedup, seqNum: r.Seq, dlqSourceARN: r.DLQ}
}

// journalAdd journals r if the server persists; callers hold s.mu.
func (s *Server) journalAdd(r *journal.Record) {
	if s.journal != nil && s.journal.Add(r) {
		go s.compact()
	}
}

func (s *Server) journalQueue(q *queue) {
	s.journalAdd(queueRecord(q))
}

func queueRecord(q *queue) *journal.Record {
	return &journal.Record{T: "q", Q: q.name, Fifo: q.fifo, Created: nanos(q.created), Modified: nanos(q.modified),
		Attrs: q.attrs, Tags: q.tags, Seq: q.seq}
}

func (s *Server) journalMessage(q *queue, m *message) {
	if s.journal != nil {
		s.journalAdd(&journal.Record{T: "m", Q: q.name, M: toMsgRecord(m)})
	}
}

func dedupRecord(q *queue, key string, e dedupEntry) *journal.Record {
	return &journal.Record{T: "dd", Q: q.name, Key: key, ID: e.messageID, SN: e.seqNum, At: nanos(e.at)}
}

// durable returns once every change so far is on disk (nil if the server
// does not persist): handlers call it before they answer.
func (s *Server) durable() error {
	if s.journal == nil {
		return nil
	}
	return s.journal.Wait()
}

// openJournal locks dir, replays its journal into s, compacts it and opens
// it for appending. It runs before the server serves anything.
func (s *Server) openJournal(dir string) error {
	j, err := journal.Open(dir, compactSlack, s.applyRecord, func() []*journal.Record { return s.capture().records() })
	if err != nil {
		return err
	}
	s.journal = j
	return nil
}

// compact rewrites the journal as a snapshot while the server runs; it
// holds s.mu only while it copies the state (journal.Journal.Compact).
func (s *Server) compact() {
	err := s.journal.Compact(&s.mu, func() func() []*journal.Record { return s.capture().records })
	if err != nil {
		s.log.Error("sqstest: compacting the journal", "err", err)
	}
}

// stateCopy is the state a snapshot holds, copied under s.mu so that it
// can be encoded after s.mu is released: queues (their maps cloned),
// messages by value (their attribute maps are never changed once sent) and
// the deduplication ids still in their window.
type stateCopy struct {
	queues []*journal.Record
	msgs   [][]journal.MsgRecord // per queue, as queues
	order  [][]uint64            // each message's message.order
	dedup  []*journal.Record
}

// capture copies the state for a snapshot. Callers hold s.mu (or own s
// alone): this is the pause an online compaction costs requests.
func (s *Server) capture() *stateCopy {
	names := make([]string, 0, len(s.queues))
	for name := range s.queues {
		names = append(names, name)
	}
	sort.Strings(names)
	c := &stateCopy{queues: make([]*journal.Record, len(names)), msgs: make([][]journal.MsgRecord, len(names)), order: make([][]uint64, len(names))}
	now := s.clock.now()
	for i, name := range names {
		q := s.queues[name]
		r := queueRecord(q)
		r.Attrs, r.Tags = maps.Clone(r.Attrs), maps.Clone(r.Tags)
		c.queues[i] = r
		msgs := make([]journal.MsgRecord, 0, len(q.byID))
		order := make([]uint64, 0, len(q.byID))
		q.each(func(m *message) {
			msgs = append(msgs, journal.MsgRecord{})
			m.record(&msgs[len(msgs)-1])
			order = append(order, m.order)
		})
		c.msgs[i], c.order[i] = msgs, order
		for k, e := range q.dedup {
			if now.Sub(e.at) < dedupWindow {
				c.dedup = append(c.dedup, dedupRecord(q, k, e))
			}
		}
	}
	return c
}

// records returns the snapshot's journal records: queues first, so that
// every redrive target exists before messages refer to it; each queue's
// messages in the order they were placed (a standard queue's hidden ones
// are copied in heap order), so that a replay rebuilds the same order.
func (c *stateCopy) records() []*journal.Record {
	recs := append([]*journal.Record(nil), c.queues...)
	for i, msgs := range c.msgs {
		idx := make([]int, len(msgs))
		for j := range idx {
			idx[j] = j
		}
		order := c.order[i]
		sort.Slice(idx, func(a, b int) bool { return order[idx[a]] < order[idx[b]] })
		for _, j := range idx {
			recs = append(recs, &journal.Record{T: "m", Q: c.queues[i].Q, M: &msgs[j]})
		}
	}
	return append(recs, c.dedup...)
}

// applyRecord replays one record. Records refer to queues and messages by name
// and id; one whose queue or message is gone (a change after a delete the
// journal also holds) is ignored.
func (s *Server) applyRecord(r *journal.Record) {
	q := s.queues[r.Q]
	if q == nil && r.T != "q" {
		return
	}
	switch r.T {
	case "q":
		if q == nil {
			q = &queue{name: r.Q, arn: s.queueARN(r.Q), fifo: r.Fifo, byID: make(map[string]*message)}
			if r.Fifo {
				q.dedup = make(map[string]dedupEntry)
			}
			s.queues[r.Q] = q
		}
		q.created, q.modified = fromNanos(r.Created), fromNanos(r.Modified)
		q.attrs, q.tags = r.Attrs, r.Tags
		if q.attrs == nil {
			q.attrs = map[string]string{}
		}
		if q.tags == nil {
			q.tags = map[string]string{}
		}
		q.seq = max(q.seq, r.Seq)
		q.redrive = nil
		if v := q.attrs[attrRedrive]; v != "" {
			q.redrive, _ = parseRedrivePolicy(v)
		}
	case "dq":
		delete(s.queues, r.Q)
	case "dd":
		if q.dedup != nil {
			q.dedup[r.Key] = dedupEntry{messageID: r.ID, seqNum: r.SN, at: fromNanos(r.At)}
		}
	case "pq":
		q.clear()
	case "m":
		if r.M == nil {
			return
		}
		m := fromMsgRecord(r.M)
		if old := q.byID[m.id]; old != nil {
			q.remove(old)
		}
		q.insert(m, s.clock.now())
		if n, err := strconv.ParseUint(m.seqNum, 10, 64); err == nil {
			q.seq = max(q.seq, n)
		}
	case "r", "v", "d":
		m := q.byID[r.ID]
		if m == nil {
			return
		}
		switch r.T {
		case "r":
			m.receives, m.visibleAt, m.firstReceive, m.receivedAt, m.handle =
				r.RC, fromNanos(r.Vis), fromNanos(r.First), fromNanos(r.Recv), r.H
			q.reposition(m, s.clock.now())
		case "v":
			m.visibleAt = fromNanos(r.Vis)
			q.reposition(m, s.clock.now())
		case "d":
			q.remove(m)
		}
	}
}
