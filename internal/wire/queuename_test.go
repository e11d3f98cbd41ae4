package wire

import (
	"strings"
	"testing"
)

func TestValidQueueName(t *testing.T) {
	for name, want := range map[string]bool{
		"orders":                          true,
		"Orders-2_b":                      true,
		"orders.fifo":                     true,
		strings.Repeat("q", 80):           true,
		strings.Repeat("q", 75) + ".fifo": true,
		"":                                false,
		".fifo":                           false,
		"orders queue":                    false,
		"orders.v2":                       false,
		strings.Repeat("q", 81):           false,
		strings.Repeat("q", 76) + ".fifo": false,
	} {
		if got := ValidQueueName(name); got != want {
			t.Errorf("ValidQueueName(%q) = %v, want %v", name, got, want)
		}
	}
}
