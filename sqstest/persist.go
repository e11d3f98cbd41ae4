package sqstest

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Persistence (Options.DataDir) is an append-only journal of every change
// to queues and messages. Each record is one line, "<crc32 hex> <JSON>",
// appended under the server's lock in the order the changes happen, so a
// replay in file order rebuilds the state. A request's answer is written
// only once everything journaled before it is on disk (fsync): a client
// never sees a change that a crash could undo. Concurrent requests share
// fsyncs (group commit): whichever handler finds records unsynced writes
// and syncs all of them, and the others wait for it.
//
// On start the journal is replayed (a torn last record, from a crash in
// mid-write, is dropped: its request was never answered) and compacted:
// the state is written to a new file as one record per queue and message,
// synced, and renamed over the old one.

const journalFile = "sqstest.journal"

// journalRecord is one journal line. T says what changed:
//
//	q   a queue's settings (created, or attributes or tags set)
//	dq  a queue deleted
//	pq  a queue purged
//	m   a message added at the tail, with its whole state
//	r   a message received (moves to the tail on standard queues)
//	v   a message's visibility changed
//	d   a message deleted
type journalRecord struct {
	T string `json:"t"`
	Q string `json:"q"`

	Fifo     bool              `json:"fifo,omitempty"`
	Created  int64             `json:"c,omitempty"`
	Modified int64             `json:"mod,omitempty"`
	Attrs    map[string]string `json:"qa,omitempty"`
	Tags     map[string]string `json:"tg,omitempty"`
	Seq      uint64            `json:"seq,omitempty"`

	M *msgRecord `json:"m,omitempty"`

	ID    string `json:"id,omitempty"`
	RC    int    `json:"rc,omitempty"`
	Vis   int64  `json:"vis,omitempty"`
	First int64  `json:"fr,omitempty"`
	Recv  int64  `json:"ra,omitempty"`
	H     string `json:"h,omitempty"`
}

// msgRecord is a message's whole state.
type msgRecord struct {
	ID    string               `json:"id"`
	Body  string               `json:"b"`
	Attrs map[string]attrValue `json:"a,omitempty"`
	Trace string               `json:"tr,omitempty"`
	Sent  int64                `json:"s"`
	Vis   int64                `json:"vis"`
	RC    int                  `json:"rc,omitempty"`
	First int64                `json:"fr,omitempty"`
	Recv  int64                `json:"ra,omitempty"`
	H     string               `json:"h,omitempty"`
	Group string               `json:"g,omitempty"`
	Dedup string               `json:"dd,omitempty"`
	Seq   string               `json:"sq,omitempty"`
	DLQ   string               `json:"dlq,omitempty"`
}

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

func toMsgRecord(m *message) *msgRecord {
	return &msgRecord{ID: m.id, Body: m.body, Attrs: m.attrs, Trace: m.traceHdr, Sent: nanos(m.sentAt),
		Vis: nanos(m.visibleAt), RC: m.receives, First: nanos(m.firstReceive), Recv: nanos(m.receivedAt),
		H: m.handle, Group: m.group, Dedup: m.dedupID, Seq: m.seqNum, DLQ: m.dlqSourceARN}
}

func (r *msgRecord) message() *message {
	return &message{id: r.ID, body: r.Body, md5Body: md5Hex(r.Body), attrs: r.Attrs, traceHdr: r.Trace,
		sentAt: fromNanos(r.Sent), visibleAt: fromNanos(r.Vis), receives: r.RC, firstReceive: fromNanos(r.First),
		receivedAt: fromNanos(r.Recv), handle: r.H, group: r.Group, dedupID: r.Dedup, seqNum: r.Seq, dlqSourceARN: r.DLQ}
}

// journal is the open journal file with its group commit state.
type journal struct {
	f *os.File

	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte // appended, not yet written
	seq     uint64 // records appended
	synced  uint64 // records on disk
	syncing bool   // a handler is writing and syncing
	err     error  // the first write or sync failure; later waits report it
}

// add appends r; callers hold s.mu, so the journal's order is the order of
// the changes.
func (j *journal) add(r *journalRecord) {
	b, err := json.Marshal(r)
	if err != nil {
		panic("sqstest: journal record: " + err.Error()) // every field is plain data
	}
	j.mu.Lock()
	j.buf = appendLine(j.buf, b)
	j.seq++
	j.mu.Unlock()
}

func appendLine(buf, b []byte) []byte {
	buf = fmt.Appendf(buf, "%08x ", crc32.ChecksumIEEE(b))
	buf = append(buf, b...)
	return append(buf, '\n')
}

// wait returns once every record appended before the call is on disk,
// writing and syncing them itself if no other handler is.
func (j *journal) wait() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	target := j.seq
	for j.synced < target && j.err == nil {
		if j.syncing {
			j.cond.Wait()
			continue
		}
		j.syncing = true
		buf, upto := j.buf, j.seq
		j.buf = nil
		j.mu.Unlock()
		_, err := j.f.Write(buf)
		if err == nil {
			err = j.f.Sync()
		}
		j.mu.Lock()
		j.syncing = false
		if err != nil {
			j.err = fmt.Errorf("sqstest: writing the journal: %w", err)
		} else {
			j.synced = upto
		}
		j.cond.Broadcast()
	}
	return j.err
}

func (j *journal) close() error {
	err := j.wait()
	return errors.Join(err, j.f.Close())
}

// journalAdd journals r if the server persists; callers hold s.mu.
func (s *Server) journalAdd(r *journalRecord) {
	if s.journal != nil {
		s.journal.add(r)
	}
}

func (s *Server) journalQueue(q *queue) {
	if s.journal != nil {
		s.journal.add(queueRecord(q))
	}
}

func queueRecord(q *queue) *journalRecord {
	return &journalRecord{T: "q", Q: q.name, Fifo: q.fifo, Created: nanos(q.created), Modified: nanos(q.modified),
		Attrs: q.attrs, Tags: q.tags, Seq: q.seq}
}

func (s *Server) journalMessage(q *queue, m *message) {
	if s.journal != nil {
		s.journal.add(&journalRecord{T: "m", Q: q.name, M: toMsgRecord(m)})
	}
}

// durable returns once every change so far is on disk (nil if the server
// does not persist): handlers call it before they answer.
func (s *Server) durable() error {
	if s.journal == nil {
		return nil
	}
	return s.journal.wait()
}

// openJournal replays dir's journal into s, compacts it and opens it for
// appending. It runs before the server serves anything.
func (s *Server) openJournal(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sqstest: data directory: %w", err)
	}
	path := filepath.Join(dir, journalFile)
	if err := s.replay(path); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := s.writeSnapshot(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("sqstest: compacting the journal: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync() // the rename is durable too
		_ = d.Close()
		if err != nil {
			return fmt.Errorf("sqstest: syncing %s: %w", dir, err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("sqstest: opening the journal: %w", err)
	}
	s.journal = &journal{f: f}
	s.journal.cond = sync.NewCond(&s.journal.mu)
	return nil
}

// writeSnapshot writes the current state as a journal to path and syncs it.
func (s *Server) writeSnapshot(path string) error {
	var buf []byte
	names := make([]string, 0, len(s.queues))
	for n := range s.queues {
		names = append(names, n)
	}
	sort.Strings(names)
	add := func(r *journalRecord) {
		b, err := json.Marshal(r)
		if err != nil {
			panic("sqstest: journal record: " + err.Error())
		}
		buf = appendLine(buf, b)
	}
	// Queues first, so that every redrive target exists before messages
	// refer to it.
	for _, n := range names {
		add(queueRecord(s.queues[n]))
	}
	for _, n := range names {
		q := s.queues[n]
		for _, m := range q.all() {
			add(&journalRecord{T: "m", Q: n, M: toMsgRecord(m)})
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("sqstest: compacting the journal: %w", err)
	}
	_, err = f.Write(buf)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sqstest: compacting the journal: %w", err)
	}
	return nil
}

// replay applies the journal at path, if any, to s. A bad record is an
// error unless it is the last one (a write a crash cut short).
func (s *Server) replay(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqstest: opening the journal: %w", err)
	}
	defer f.Close()
	rd := bufio.NewReaderSize(f, 1<<20)
	for line := 1; ; line++ {
		b, err := rd.ReadBytes('\n')
		if err == io.EOF {
			return nil // complete, or a torn last record
		}
		if err != nil {
			return fmt.Errorf("sqstest: reading the journal: %w", err)
		}
		r, ok := parseRecord(b)
		if !ok {
			if _, perr := rd.Peek(1); perr == io.EOF {
				return nil // a torn last record
			}
			return fmt.Errorf("sqstest: journal %s: record %d is corrupt", path, line)
		}
		s.applyRecord(r)
	}
}

func parseRecord(b []byte) (*journalRecord, bool) {
	b = bytes.TrimSuffix(b, []byte("\n"))
	sum, body, ok := bytes.Cut(b, []byte(" "))
	if !ok || len(sum) != 8 {
		return nil, false
	}
	var want [4]byte
	if _, err := hex.Decode(want[:], sum); err != nil {
		return nil, false
	}
	if crc32.ChecksumIEEE(body) != uint32(want[0])<<24|uint32(want[1])<<16|uint32(want[2])<<8|uint32(want[3]) {
		return nil, false
	}
	r := new(journalRecord)
	if err := json.Unmarshal(body, r); err != nil {
		return nil, false
	}
	return r, true
}

// applyRecord replays one record. Records refer to queues and messages by name
// and id; one whose queue or message is gone (a change after a delete the
// journal also holds) is ignored.
func (s *Server) applyRecord(r *journalRecord) {
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
	case "pq":
		q.clear()
	case "m":
		if r.M == nil {
			return
		}
		m := r.M.message()
		if old := q.byID[m.id]; old != nil {
			q.remove(old)
		}
		q.insert(m, s.clock.Now())
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
			q.reposition(m, s.clock.Now())
		case "v":
			m.visibleAt = fromNanos(r.Vis)
			q.reposition(m, s.clock.Now())
		case "d":
			q.remove(m)
		}
	}
}
