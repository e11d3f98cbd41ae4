package callback

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestRunRecoversAndLogs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	if Run(log, "the hook", func() { panic("boom") }) != true {
		t.Fatal("a panic was not reported")
	}
	if !strings.Contains(buf.String(), "the hook panicked") || !strings.Contains(buf.String(), "boom") {
		t.Fatalf("log %q does not name the hook and the panic", buf.String())
	}
	ran := false
	if Run(nil, "quiet", func() { ran = true }) || !ran {
		t.Fatal("a normal call was reported as a panic, or did not run")
	}
	if !Run(nil, "nil logger", func() { panic(1) }) {
		t.Fatal("a panic with a nil logger was not reported")
	}
}
