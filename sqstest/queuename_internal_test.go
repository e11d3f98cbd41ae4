package sqstest

import (
	"strings"
	"testing"

	"github.com/tempqueues/tempqueues/internal/wire"
)

// TestQueueNameRuleAgreesWithTheClients: the server refuses exactly the
// names the library's clients refuse before any call.
func TestQueueNameRuleAgreesWithTheClients(t *testing.T) {
	for _, name := range []string{
		"", "q", "a-b_c", "Q1", strings.Repeat("a", 80), strings.Repeat("a", 81),
		"q.fifo", ".fifo", strings.Repeat("a", 75) + ".fifo", strings.Repeat("a", 76) + ".fifo",
		"a.b", "a b", "é", "q.fifo.fifo", "q/", "tq-host-0b7f2c1e",
	} {
		if got, want := validQueueName(name), wire.ValidQueueName(name); got != want {
			t.Errorf("%q: sqstest says %v, the clients %v", name, got, want)
		}
	}
}
