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
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
// the state is written to a new file as one record per queue, message and
// live deduplication id, synced, and renamed over the old one. While the
// server runs, the same compaction starts in the background whenever the
// journal has grown past twice the last snapshot plus compactSlack (see
// compact): the journal stays within a small multiple of the live data.
//
// The directory is locked (flock on sqstest.lock, which holds the pid of
// the server that has it) for as long as the server runs: a second server
// on it would compact the journal under the first one's feet.

const (
	journalFile = "sqstest.journal"
	lockFile    = "sqstest.lock"
)

// compactSlack is the growth beyond twice the last snapshot that starts an
// online compaction. Tests lower it.
var compactSlack int64 = 4 << 20

// journalRecord is one journal line. T says what changed:
//
//	q   a queue's settings (created, or attributes or tags set)
//	dq  a queue deleted
//	pq  a queue purged
//	m   a message added at the tail, with its whole state
//	r   a message received (moves to the tail on standard queues)
//	v   a message's visibility changed
//	d   a message deleted
//	dd  a FIFO deduplication id accepted (kept for SQS's 5-minute window)
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

	// dd: the deduplication key (group + id under messageGroup scope), the
	// original's sequence number and when it was accepted.
	Key string `json:"k,omitempty"`
	SN  string `json:"sn,omitempty"`
	At  int64  `json:"at,omitempty"`
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
	r := new(msgRecord)
	m.record(r)
	return r
}

// record fills r with m's state.
func (m *message) record(r *msgRecord) {
	*r = msgRecord{ID: m.id, Body: m.body, Attrs: m.attrs, Trace: m.traceHdr, Sent: nanos(m.sentAt),
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
	f    *os.File
	lock *os.File // holds the directory's flock while open
	path string

	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte // appended, not yet written
	seq     uint64 // records appended
	synced  uint64 // records on disk
	syncing bool   // a handler (or the compaction) is writing and syncing
	err     error  // the first write or sync failure; later waits report it

	size       int64  // bytes in the file and in buf
	base       int64  // bytes of the last snapshot
	compacting bool   // a compaction is running
	tailing    bool   // records appended go to tail too
	tail       []byte // records appended since the running compaction's snapshot
	compacted  int    // compactions done while running
	pauseMax   time.Duration
	closed     bool // no compaction starts once set
	done       sync.WaitGroup
}

// add appends r; callers hold s.mu, so the journal's order is the order of
// the changes. It reports whether the journal has grown enough that a
// compaction should start; the caller starts it.
func (j *journal) add(r *journalRecord) bool {
	b, err := json.Marshal(r)
	if err != nil {
		panic("sqstest: journal record: " + err.Error()) // every field is plain data
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	n := len(j.buf)
	j.buf = appendLine(j.buf, b)
	if j.tailing {
		j.tail = append(j.tail, j.buf[n:]...)
	}
	j.size += int64(len(j.buf) - n)
	j.seq++
	if !j.compacting && !j.closed && j.err == nil && j.size > 2*j.base+compactSlack {
		j.compacting = true
		j.done.Add(1)
		return true
	}
	return false
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
		f, buf, upto := j.f, j.buf, j.seq
		j.buf = nil
		j.mu.Unlock()
		_, err := f.Write(buf)
		if err == nil {
			err = f.Sync()
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
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	j.done.Wait() // a compaction in progress
	err := j.wait()
	return errors.Join(err, j.f.Close(), j.lock.Close())
}

// journalAdd journals r if the server persists; callers hold s.mu.
func (s *Server) journalAdd(r *journalRecord) {
	if s.journal != nil && s.journal.add(r) {
		go s.compact()
	}
}

func (s *Server) journalQueue(q *queue) {
	s.journalAdd(queueRecord(q))
}

func queueRecord(q *queue) *journalRecord {
	return &journalRecord{T: "q", Q: q.name, Fifo: q.fifo, Created: nanos(q.created), Modified: nanos(q.modified),
		Attrs: q.attrs, Tags: q.tags, Seq: q.seq}
}

func (s *Server) journalMessage(q *queue, m *message) {
	if s.journal != nil {
		s.journalAdd(&journalRecord{T: "m", Q: q.name, M: toMsgRecord(m)})
	}
}

func dedupRecord(q *queue, key string, e dedupEntry) *journalRecord {
	return &journalRecord{T: "dd", Q: q.name, Key: key, ID: e.messageID, SN: e.seqNum, At: nanos(e.at)}
}

// durable returns once every change so far is on disk (nil if the server
// does not persist): handlers call it before they answer.
func (s *Server) durable() error {
	if s.journal == nil {
		return nil
	}
	return s.journal.wait()
}

// openJournal locks dir, replays its journal into s, compacts it and opens
// it for appending. It runs before the server serves anything.
func (s *Server) openJournal(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sqstest: data directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, journalFile)
	if err := s.replay(path); err != nil {
		_ = lock.Close()
		return err
	}
	buf := encodeSnapshot(s.capture().records())
	f, err := installSnapshot(path, buf)
	if err != nil {
		_ = lock.Close()
		return err
	}
	s.journal = &journal{f: f, lock: lock, path: path, size: int64(len(buf)), base: int64(len(buf))}
	s.journal.cond = sync.NewCond(&s.journal.mu)
	return nil
}

// lockDir takes the data directory's lock, or says which process has it.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sqstest: locking the data directory: %w", err)
	}
	ok, err := tryLock(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("sqstest: locking the data directory %s: %w", dir, err)
	}
	if !ok {
		holder, _ := io.ReadAll(io.LimitReader(f, 32))
		_ = f.Close()
		pid := strings.TrimSpace(string(holder))
		if pid == "" {
			pid = "unknown"
		}
		return nil, fmt.Errorf("sqstest: data directory %s is in use by another server (pid %s); one server per directory", dir, pid)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("sqstest: locking the data directory: %w", err)
	}
	return f, nil
}

// stateCopy is the state a snapshot holds, copied under s.mu so that it
// can be encoded after s.mu is released: queues (their maps cloned),
// messages by value (their attribute maps are never changed once sent) and
// the deduplication ids still in their window.
type stateCopy struct {
	queues []*journalRecord
	msgs   [][]msgRecord // per queue, as queues
	order  [][]uint64    // each message's message.order
	dedup  []*journalRecord
}

// capture copies the state for a snapshot. Callers hold s.mu (or own s
// alone): this is the pause an online compaction costs requests.
func (s *Server) capture() *stateCopy {
	names := make([]string, 0, len(s.queues))
	for name := range s.queues {
		names = append(names, name)
	}
	sort.Strings(names)
	c := &stateCopy{queues: make([]*journalRecord, len(names)), msgs: make([][]msgRecord, len(names)), order: make([][]uint64, len(names))}
	now := s.clock.Now()
	for i, name := range names {
		q := s.queues[name]
		r := queueRecord(q)
		r.Attrs, r.Tags = maps.Clone(r.Attrs), maps.Clone(r.Tags)
		c.queues[i] = r
		msgs := make([]msgRecord, 0, len(q.byID))
		order := make([]uint64, 0, len(q.byID))
		q.each(func(m *message) {
			msgs = append(msgs, msgRecord{})
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
func (c *stateCopy) records() []*journalRecord {
	recs := append([]*journalRecord(nil), c.queues...)
	for i, msgs := range c.msgs {
		idx := make([]int, len(msgs))
		for j := range idx {
			idx[j] = j
		}
		order := c.order[i]
		sort.Slice(idx, func(a, b int) bool { return order[idx[a]] < order[idx[b]] })
		for _, j := range idx {
			recs = append(recs, &journalRecord{T: "m", Q: c.queues[i].Q, M: &msgs[j]})
		}
	}
	return append(recs, c.dedup...)
}

// encodeSnapshot encodes a snapshot's records.
func encodeSnapshot(recs []*journalRecord) []byte {
	var buf []byte
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			panic("sqstest: journal record: " + err.Error())
		}
		buf = appendLine(buf, b)
	}
	return buf
}

// installSnapshot writes buf to a new file beside path, syncs it and
// renames it over path, returning the new file open for appending.
func installSnapshot(path string, buf []byte) (*os.File, error) {
	f, err := createSnapshot(path)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(buf); err != nil {
		return nil, abandonSnapshot(f, path, err)
	}
	return f, finishSnapshot(f, path)
}

func createSnapshot(path string) (*os.File, error) {
	f, err := os.OpenFile(path+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sqstest: compacting the journal: %w", err)
	}
	return f, nil
}

func abandonSnapshot(f *os.File, path string, err error) error {
	_ = f.Close()
	_ = os.Remove(path + ".tmp")
	return fmt.Errorf("sqstest: compacting the journal: %w", err)
}

// finishSnapshot syncs f, written as path+".tmp", and renames it over
// path; on failure it closes and removes it.
func finishSnapshot(f *os.File, path string) error {
	if err := f.Sync(); err != nil {
		return abandonSnapshot(f, path, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return abandonSnapshot(f, path, err)
	}
	dir := filepath.Dir(path)
	d, err := os.Open(dir)
	if err == nil {
		err = d.Sync() // the rename is durable too
		_ = d.Close()
	}
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("sqstest: syncing %s: %w", dir, err)
	}
	return nil
}

// compact rewrites the journal as a snapshot while the server runs. It
// holds s.mu only to copy the state (the pause requests see; see
// BenchmarkCompactionPause). The records appended meanwhile go on to the
// old file, which stays the one a crash would replay, and are copied after
// the snapshot into the new one; most of them without a lock, the last
// ones while the journal's lock keeps new records out, for the sync and
// the rename.
func (s *Server) compact() {
	j := s.journal
	defer j.done.Done()
	t0 := time.Now()
	s.mu.Lock()
	state := s.capture()
	j.mu.Lock()
	j.tailing, j.tail = true, nil
	j.mu.Unlock()
	s.mu.Unlock()
	pause := time.Since(t0)

	buf := encodeSnapshot(state.records())
	f, err := createSnapshot(j.path)
	if err == nil {
		if _, werr := f.Write(buf); werr != nil {
			err = abandonSnapshot(f, j.path, werr)
		}
	}
	copied := 0
	for err == nil {
		j.mu.Lock()
		chunk := j.tail[copied:]
		j.mu.Unlock()
		if len(chunk) < 64<<10 {
			break
		}
		if _, werr := f.Write(chunk); werr != nil {
			err = abandonSnapshot(f, j.path, werr)
		}
		copied += len(chunk)
	}
	if err == nil {
		if serr := f.Sync(); serr != nil { // most of it, before the lock
			err = abandonSnapshot(f, j.path, serr)
		}
	}

	j.mu.Lock()
	defer j.mu.Unlock()
	for j.syncing {
		j.cond.Wait()
	}
	// Nothing writes the old file now; everything appended since the
	// snapshot is in j.tail, and j.buf holds none of what came before it
	// that a waiting request needs: the snapshot has it.
	if err == nil && j.err != nil {
		err = abandonSnapshot(f, j.path, j.err)
	}
	if err == nil {
		if _, werr := f.Write(j.tail[copied:]); werr != nil {
			err = abandonSnapshot(f, j.path, werr)
		}
	}
	if err == nil {
		err = finishSnapshot(f, j.path)
	}
	if err == nil {
		_ = j.f.Close()
		j.f = f
		j.buf = nil
		j.synced = j.seq
		j.size = int64(len(buf) + len(j.tail))
		j.base = int64(len(buf))
		j.compacted++
		j.pauseMax = max(j.pauseMax, pause)
	} else {
		j.base = j.size // try again only after as much growth again
		s.log.Error("sqstest: compacting the journal", "err", err)
	}
	j.tailing, j.tail = false, nil
	j.compacting = false
	j.cond.Broadcast()
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
