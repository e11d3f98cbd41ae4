package payload

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSplitKeepsCharacters: pieces join back to the body, none longer
// than asked, and none cuts a UTF-8 character.
func TestSplitKeepsCharacters(t *testing.T) {
	body := strings.Repeat("aé€😀", 1000)
	for _, size := range []int{4, 5, 7, 100, len(body), len(body) + 1} {
		pieces := Split(body, size)
		if strings.Join(pieces, "") != body {
			t.Fatalf("size %d: the pieces do not join back", size)
		}
		for i, p := range pieces {
			if len(p) > size || !utf8.ValidString(p) || len(p) == 0 {
				t.Fatalf("size %d: piece %d of %d bytes, valid %v", size, i, len(p), utf8.ValidString(p))
			}
		}
	}
}

// TestJoinerOrderAndDuplicates: parts in any order, some twice, join in
// their order; a part past the last is ignored.
func TestJoinerOrderAndDuplicates(t *testing.T) {
	var j Joiner
	parts := []string{"a", "b", "c", "d"}
	for i, seq := range []int{3, 1, 1, 0, 3, 2} {
		done, err := j.Add(seq, seq == 3, parts[seq])
		if err != nil {
			t.Fatal(err)
		}
		if done != (i == 5) {
			t.Fatalf("after %d parts: complete %v", i+1, done)
		}
	}
	if j.Body() != "abcd" || j.Held() != 4 {
		t.Fatalf("joined %q, %d held", j.Body(), j.Held())
	}
	if done, err := j.Add(4, false, "e"); err != nil || !done || j.Body() != "abcd" {
		t.Fatalf("a part past the last: %v %v %q", done, err, j.Body())
	}
}

// TestJoinerRefuses: too many parts, two different last parts, and parts
// that add up past MaxJoined are errors.
func TestJoinerRefuses(t *testing.T) {
	var j Joiner
	if _, err := j.Add(MaxParts, false, "x"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("part %d: %v", MaxParts, err)
	}
	j = Joiner{}
	_, _ = j.Add(5, false, "x")
	if _, err := j.Add(2, true, "x"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a last part below one that arrived: %v", err)
	}
	j = Joiner{}
	big := strings.Repeat("x", MaxJoined/2)
	_, _ = j.Add(1, false, big)
	_, _ = j.Add(2, false, big)
	if _, err := j.Add(0, false, "x"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("past %d MiB: %v", MaxJoined>>20, err)
	}
	if j.Held() > MaxJoined {
		t.Errorf("%d bytes held, over the limit", j.Held())
	}
}
