// Package journal is sqstest's persistence (Options.DataDir): an
// append-only journal of every change to queues and messages, on disk
// before a request is answered, compacted as it grows, in a directory one
// server locks. It knows records, files and the lock; what a record means
// to the server's queues is the server's business (sqstest's persist.go).
//
// Each record is one line, "<crc32 hex> <JSON>", appended under the
// server's lock in the order the changes happen, so a replay in file order
// rebuilds the state. A request's answer is written only once everything
// journaled before it is on disk (fsync): a client never sees a change that
// a crash could undo. Concurrent requests share fsyncs (group commit):
// whichever handler finds records unsynced writes and syncs all of them,
// and the others wait for it.
//
// On start the journal is replayed (a torn last record, from a crash in
// mid-write, is dropped: its request was never answered) and compacted:
// the state is written to a new file as one record per queue, message and
// live deduplication id, synced, and renamed over the old one. While the
// server runs, the same compaction starts in the background whenever the
// journal has grown past twice the last snapshot plus a slack (see
// Compact): the journal stays within a small multiple of the live data.
//
// The directory is locked (flock on sqstest.lock, which holds the pid of
// the server that has it) for as long as the server runs: a second server
// on it would compact the journal under the first one's feet.
package journal

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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
)

const (
	// FileName is the journal's file in the data directory.
	FileName = "sqstest.journal"
	lockFile = "sqstest.lock"
)

// Record is one journal line. T says what changed:
//
//	q   a queue's settings (created, or attributes or tags set)
//	dq  a queue deleted
//	pq  a queue purged
//	m   a message added at the tail, with its whole state
//	r   a message received (moves to the tail on standard queues)
//	v   a message's visibility changed
//	d   a message deleted
//	dd  a FIFO deduplication id accepted (kept for SQS's 5-minute window)
type Record struct {
	T string `json:"t"`
	Q string `json:"q"`

	Fifo     bool              `json:"fifo,omitempty"`
	Created  int64             `json:"c,omitempty"`
	Modified int64             `json:"mod,omitempty"`
	Attrs    map[string]string `json:"qa,omitempty"`
	Tags     map[string]string `json:"tg,omitempty"`
	Seq      uint64            `json:"seq,omitempty"`

	M *MsgRecord `json:"m,omitempty"`

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

// MsgRecord is a message's whole state.
type MsgRecord struct {
	ID    string                   `json:"id"`
	Body  string                   `json:"b"`
	Attrs map[string]api.AttrValue `json:"a,omitempty"`
	Trace string                   `json:"tr,omitempty"`
	Sent  int64                    `json:"s"`
	Vis   int64                    `json:"vis"`
	RC    int                      `json:"rc,omitempty"`
	First int64                    `json:"fr,omitempty"`
	Recv  int64                    `json:"ra,omitempty"`
	H     string                   `json:"h,omitempty"`
	Group string                   `json:"g,omitempty"`
	Dedup string                   `json:"dd,omitempty"`
	Seq   string                   `json:"sq,omitempty"`
	DLQ   string                   `json:"dlq,omitempty"`
}

// Journal is the open journal file with its group commit state.
type Journal struct {
	f     *os.File
	lock  *os.File // holds the directory's flock while open
	path  string
	slack int64 // growth beyond twice the last snapshot that starts a compaction

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

// Open locks dir (creating it if missing), replays its journal through
// apply, writes the state snapshot returns as the new journal and opens it
// for appending. slack is the growth beyond twice the last snapshot that
// makes Add ask for a compaction.
func Open(dir string, slack int64, apply func(*Record), snapshot func() []*Record) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sqstest: data directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, FileName)
	if err := replay(path, apply); err != nil {
		_ = lock.Close()
		return nil, err
	}
	buf := encodeSnapshot(snapshot())
	f, err := installSnapshot(path, buf)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	j := &Journal{f: f, lock: lock, path: path, slack: slack, size: int64(len(buf)), base: int64(len(buf))}
	j.cond = sync.NewCond(&j.mu)
	return j, nil
}

// Add appends r; callers hold the server's lock, so the journal's order is
// the order of the changes. It reports whether the journal has grown
// enough that a compaction should start; the caller then runs Compact.
func (j *Journal) Add(r *Record) bool {
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
	if !j.compacting && !j.closed && j.err == nil && j.size > 2*j.base+j.slack {
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

// Wait returns once every record appended before the call is on disk,
// writing and syncing them itself if no other handler is.
func (j *Journal) Wait() error {
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

// Close waits for a compaction in progress, syncs what was appended and
// closes the journal and the directory's lock.
func (j *Journal) Close() error {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	j.done.Wait() // a compaction in progress
	err := j.Wait()
	return errors.Join(err, j.f.Close(), j.lock.Close())
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

// encodeSnapshot encodes a snapshot's records.
func encodeSnapshot(recs []*Record) []byte {
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

// Start begins a compaction that Add did not ask for (a test's), waiting
// for one in progress first; the caller then runs Compact.
func (j *Journal) Start() {
	j.mu.Lock()
	if j.compacting {
		j.mu.Unlock()
		j.done.Wait()
		j.mu.Lock()
	}
	j.compacting = true
	j.done.Add(1)
	j.mu.Unlock()
}

// Compact rewrites the journal as a snapshot while the server runs, once
// Add asked for it (or Start began it). It holds mu, the lock Add's callers
// hold, only while capture copies the state (the pause requests see; see
// BenchmarkCompactionPause); capture returns the function that makes the
// snapshot's records from the copy, which runs after mu is released. The
// records appended meanwhile go on to the old file, which stays the one a
// crash would replay, and are copied after the snapshot into the new one;
// most of them without a lock, the last ones while the journal's lock
// keeps new records out, for the sync and the rename. It returns the
// compaction's failure; the journal then goes on in the old file.
func (j *Journal) Compact(mu sync.Locker, capture func() (records func() []*Record)) error {
	defer j.done.Done()
	t0 := time.Now()
	mu.Lock()
	records := capture()
	j.mu.Lock()
	j.tailing, j.tail = true, nil
	j.mu.Unlock()
	mu.Unlock()
	pause := time.Since(t0)

	buf := encodeSnapshot(records())
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
	}
	j.tailing, j.tail = false, nil
	j.compacting = false
	j.cond.Broadcast()
	return err
}

// Stats waits for a compaction in progress, then returns the journal's
// size in bytes, the compactions done since it was opened and the longest
// time one held the server's lock.
func (j *Journal) Stats() (size int64, compactions int, pause time.Duration) {
	j.done.Wait()
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.size, j.compacted, j.pauseMax
}

// replay applies the journal at path, if any, through apply. A bad record
// is an error unless it is the last one (a write a crash cut short).
func replay(path string, apply func(*Record)) error {
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
		apply(r)
	}
}

func parseRecord(b []byte) (*Record, bool) {
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
	r := new(Record)
	if err := json.Unmarshal(body, r); err != nil {
		return nil, false
	}
	return r, true
}
