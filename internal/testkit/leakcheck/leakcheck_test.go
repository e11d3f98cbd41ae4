package leakcheck

import "testing"

func TestStartedByTest(t *testing.T) {
	for _, c := range []struct {
		created string
		want    bool
	}{
		{"github.com/tempqueues/tempqueues/requester_test.TestObserver.func1 in goroutine 654", true},
		{"github.com/tempqueues/tempqueues/requester_test.echo in goroutine 7", true},
		{"github.com/tempqueues/tempqueues/virtualqueue.TestPoller.func2.1 in goroutine 9", true},
		{"github.com/tempqueues/tempqueues/virtualqueue.BenchmarkRoute in goroutine 9", true},
		{"github.com/tempqueues/tempqueues/virtualqueue.(*Host).startPoller in goroutine 12", false},
		{"github.com/tempqueues/tempqueues/internal/consume.Run.func3 in goroutine 3", false},
	} {
		g := "goroutine 1 [select]:\nmain.f()\n\t/x.go:1\ncreated by " + c.created + "\n\t/x.go:2 +0x1"
		if got := startedByTest(g); got != c.want {
			t.Errorf("created by %s: startedByTest = %v, want %v", c.created, got, c.want)
		}
	}
	if startedByTest("goroutine 1 [running]:\nmain.main()\n\t/x.go:1") {
		t.Error("a goroutine with no creator counted as a test's")
	}
}
