// Package leakcheck fails a test when goroutines running tempqueues code are
// still alive after the code under test was closed.
package leakcheck

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tempqueues/tempqueues/internal/testkit/testtime"
)

const module = "github.com/tempqueues/tempqueues/"

// Check waits up to 5 seconds for every goroutine executing tempqueues code,
// other than test goroutines, to end, and fails tb with their stacks if some
// remain. Call it after closing what the test created (or defer it).
func Check(tb testing.TB) {
	tb.Helper()
	var leaked []string
	if !testtime.Until(5*time.Second, func() bool { leaked = Leaked(); return len(leaked) == 0 }) {
		tb.Fatalf("leakcheck: %d goroutines still running tempqueues code:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}

// Leaked returns the stacks of goroutines running tempqueues code outside
// tests and this package.
func Leaked() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		s := string(g)
		if !strings.Contains(s, module) || strings.Contains(s, "testing.tRunner") ||
			strings.Contains(s, module+"internal/testkit/leakcheck") || strings.Contains(s, "testing.(*F).Fuzz") {
			continue
		}
		// Test servers (the fauxqs harness, sqstest) are closed after the
		// test body, by t.Cleanup, and a child process's output is read as
		// long as the child runs (internal/testkit/child): their goroutines are not
		// leaks of the code under test.
		if createdBy(s, module+"internal/testkit/sqstestenv") || createdBy(s, module+"sqstest.") ||
			createdBy(s, module+"internal/testkit/child.") {
			continue
		}
		// A goroutine a test function started is that test's own: it may
		// outlive its test and would otherwise fail whichever test checks
		// next. The code under test starts its goroutines from its own
		// functions.
		if startedByTest(s) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// createdBy reports whether the goroutine stack g was started by a function
// whose name starts with prefix.
func createdBy(g, prefix string) bool {
	_, after, ok := strings.Cut(g, "\ncreated by ")
	return ok && strings.HasPrefix(after, prefix)
}

// startedByTest reports whether the goroutine stack g was started by a test
// function (or a closure in one) or by any function of an external _test
// package.
func startedByTest(g string) bool {
	_, after, ok := strings.Cut(g, "\ncreated by ")
	if !ok {
		return false
	}
	fn, _, _ := strings.Cut(after, " ")
	fn, _, _ = strings.Cut(fn, "\n")
	pkg, name := fn, ""
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		if j := strings.Index(fn[i:], "."); j >= 0 {
			pkg, name = fn[:i+j], fn[i+j+1:]
		}
	}
	if strings.HasSuffix(pkg, "_test") {
		return true
	}
	for _, p := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
