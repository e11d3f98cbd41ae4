package journal_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tempqueues/tempqueues/sqstest/internal/journal"
)

func open(t *testing.T, dir string, state []*journal.Record) (*journal.Journal, []*journal.Record) {
	t.Helper()
	var replayed []*journal.Record
	j, err := journal.Open(dir, 1<<20, func(r *journal.Record) { replayed = append(replayed, r) },
		func() []*journal.Record { return state })
	if err != nil {
		t.Fatal(err)
	}
	return j, replayed
}

// What was added and waited for is replayed in order by the next Open,
// after the snapshot the last Open wrote.
func TestReplayInOrder(t *testing.T) {
	dir := t.TempDir()
	snap := []*journal.Record{{T: "q", Q: "jobs", Attrs: map[string]string{"DelaySeconds": "0"}}}
	j, replayed := open(t, dir, snap)
	if len(replayed) != 0 {
		t.Fatalf("a new directory replayed %d records", len(replayed))
	}
	added := []*journal.Record{
		{T: "m", Q: "jobs", M: &journal.MsgRecord{ID: "m1", Body: "one", Sent: 1, Vis: 1}},
		{T: "r", Q: "jobs", ID: "m1", RC: 1, Vis: 2, H: "h1"},
		{T: "d", Q: "jobs", ID: "m1"},
	}
	for _, r := range added {
		if j.Add(r) {
			t.Fatal("a few records asked for a compaction")
		}
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, replayed = open(t, dir, nil)
	defer j.Close()
	if want := append(snap, added...); !reflect.DeepEqual(replayed, want) {
		t.Errorf("replayed %+v, want %+v", replayed, want)
	}
}

// A torn last record (a crash in mid-write) is dropped; a corrupt one
// before the end fails the Open.
func TestTornAndCorruptRecords(t *testing.T) {
	dir := t.TempDir()
	j, _ := open(t, dir, []*journal.Record{{T: "q", Q: "a"}, {T: "q", Q: "b"}})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, journal.FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, `0000abcd {"t":"q","q":"c`...), 0o644); err != nil {
		t.Fatal(err)
	}
	j, replayed := open(t, dir, nil)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if len(replayed) != 2 || replayed[1].Q != "b" {
		t.Errorf("after a torn record replayed %+v", replayed)
	}

	lines := strings.SplitAfter(string(b), "\n")
	corrupt := strings.Replace(lines[0], `"a"`, `"x"`, 1) + lines[1]
	if err := os.WriteFile(path, []byte(corrupt), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = journal.Open(dir, 1<<20, func(*journal.Record) {}, func() []*journal.Record { return nil })
	if err == nil || !strings.Contains(err.Error(), "record 1 is corrupt") {
		t.Errorf("Open over a corrupt first record: %v", err)
	}
}

// One journal per directory: a second Open fails while the first holds it.
func TestDirectoryLocked(t *testing.T) {
	dir := t.TempDir()
	j, _ := open(t, dir, nil)
	defer j.Close()
	_, err := journal.Open(dir, 1<<20, func(*journal.Record) {}, func() []*journal.Record { return nil })
	if err == nil || !strings.Contains(err.Error(), "in use by another server") {
		t.Skipf("no directory lock on this platform: %v", err)
	}
}

// Past the slack, Add asks for a compaction; Compact rewrites the journal
// as the captured state plus what was added meanwhile.
func TestCompact(t *testing.T) {
	dir := t.TempDir()
	var replayed []*journal.Record
	j, err := journal.Open(dir, 64, func(r *journal.Record) { replayed = append(replayed, r) },
		func() []*journal.Record { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	asked := false
	for i := 0; i < 10 && !asked; i++ {
		mu.Lock()
		asked = j.Add(&journal.Record{T: "q", Q: "churn"})
		mu.Unlock()
	}
	if !asked {
		t.Fatal("Add never asked for a compaction")
	}
	state := []*journal.Record{{T: "q", Q: "kept"}}
	if err := j.Compact(&mu, func() func() []*journal.Record {
		return func() []*journal.Record { return state }
	}); err != nil {
		t.Fatal(err)
	}
	if _, n, _ := j.Stats(); n != 1 {
		t.Errorf("%d compactions, want 1", n)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, replayed = open(t, dir, nil)
	defer j.Close()
	if len(replayed) != 1 || replayed[0].Q != "kept" {
		t.Errorf("after the compaction replayed %+v", replayed)
	}
}
