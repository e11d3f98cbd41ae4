package sqstestenv

import (
	"os"
	"testing"

	"github.com/tempqueues/tempqueues/sqstest"
)

// SQSTest starts an in-process sqstest server for the test, closed when the
// test ends, and returns it as a Backend with Name "sqstest" and Server set.
// optFns configure the server, e.g. to give it a *sqstest.Clock.
func SQSTest(tb testing.TB, optFns ...func(*sqstest.Options)) *Backend {
	tb.Helper()
	srv := sqstest.Start(tb, optFns...)
	return &Backend{Name: "sqstest", Endpoint: srv.URL(), Server: srv}
}

// All returns the backends a test should run on: the external one when
// TEMPQUEUES_TEST_ENDPOINT or TEMPQUEUES_TEST_AWS names one, otherwise
// fauxqs (when installed; under CI=true its absence fails the test) and a
// fresh sqstest server.
func All(tb testing.TB) []*Backend {
	tb.Helper()
	if b := External(tb); b != nil {
		return []*Backend{b}
	}
	var out []*Backend
	fauxqsOnce.Do(func() { fauxqs, fauxqsErr = startFauxqs() })
	switch {
	case fauxqsErr == nil:
		out = append(out, fauxqs)
	case os.Getenv("CI") == "true":
		tb.Fatalf("sqstestenv: fauxqs unavailable under CI: %v", fauxqsErr)
	default:
		tb.Logf("sqstestenv: fauxqs unavailable, running on sqstest only (run `make emulator`): %v", fauxqsErr)
	}
	return append(out, SQSTest(tb))
}

// Each runs fn as a subtest per backend of All, named after the backend
// ("fauxqs", "sqstest", or the external one), so that a package's tests run
// unchanged on the emulator and on sqstest.
func Each(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	if b := External(t); b != nil {
		t.Run(b.Name, func(t *testing.T) { fn(t, b) })
		return
	}
	t.Run("fauxqs", func(t *testing.T) { fn(t, Fauxqs(t)) })
	t.Run("sqstest", func(t *testing.T) { fn(t, SQSTest(t)) })
}
