package apisurface

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/tempqueues/tempqueues"

// library lists the public packages of the core module, lowest layer first.
var library = []string{
	"sqsapi", "observe", "sqsclient", "sqstest", "backlog", "reaper", "virtualqueue", "responder",
	"responder/storetest", "redrive", "tempqueue", "requester", "sqshttp",
}

// limits are the surface budgets the project holds itself to, each
// package's count when issue 27 cut them (570 in all before, one
// observation interface and one form per error condition after). They go
// down, or up only for a feature that cannot live elsewhere (reaper's
// LeaseQueueName and NextSweepWindow, with which tools show a fleet's
// sweeps without repeating its schedule; sqsapi's DeadlineAttribute and
// SessionAttribute, wire names peers must share; sessions, issue 33:
// requester +13, OpenSession and its Session, SessionOptions and Message
// with their fields, ErrSendClosed and ErrSessionAborted; responder +4,
// Request.Recv, ErrCallerGone, ErrSessionsUnsupported and
// Options.SessionQueuePrefix; one Options per constructor, issue 37:
// reaper +2, SweeperOptions and Options.SweeperOptions, for the fields a
// Sweeper ignored, against responder.Client, tempqueue's VirtualQueue,
// sqshttp's HandlerOptions.Now and backlog's WorkersFunc and
// ProcessingTimeFunc, gone; sqsclient +1, CallCounter.Billed, the
// requests SQS bills, which only the client's middleware can count;
// negotiated compression, issue 34: sqsapi +2, AcceptAttribute and
// BodyAttribute, wire names peers must share; requester +3,
// Options.CompressRequests and Options.DisableCompression, which only the
// caller can decide (a Java responder cannot read a compressed request),
// and ErrBadResponse, the one new way a call fails; responder +1,
// Options.DisableCompression); payloads in S3, issue 34: sqsapi +6,
// PayloadStore and its three methods, the one interface every adapter
// and the nested s3payload share, and ErrPayloadNotFound and
// ErrNoPayloadStore, which a store and a caller must both match;
// requester and responder +1 each, Options.PayloadStore; any size
// through the adapters, issue 34: sqshttp +2, TransportOptions and
// HandlerOptions.PayloadStore, since the adapters put and read their own
// objects (a body raw, not a whole envelope, and on sessions, which the
// requester does not offload) and a Transport cannot read its
// requester's options; responder +1, Request.CompressedReplies, which
// nested adapters need to check a reply's size as it is sent (sqsgrpc
// cannot read the internal context mark sqshttp uses). The direction of
// travel is under 400 in all (total).
var limits = map[string]int{
	"sqsapi": 59, "observe": 25, "sqsclient": 6, "sqstest": 51, "backlog": 35, "reaper": 47,
	"virtualqueue": 42, "responder": 105, "responder/storetest": 1, "redrive": 45,
	"tempqueue": 14, "requester": 62, "sqshttp": 14,
}

// total bounds the sum of the limits.
const total = 506

// TestSurface reports each library package's non-test lines, exported
// identifiers and module-local imports (go test -v shows the table), and
// fails when a package exceeds its budget or exports a type users cannot
// name.
func TestSurface(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	var b strings.Builder
	fmt.Fprintf(&b, "%-20s %6s %8s  %s\n", "package", "lines", "exported", "imports")
	sum, budget := 0, 0
	for _, dir := range library {
		p, err := Measure(filepath.Join(root, dir), module)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%-20s %6d %8d  %s\n", dir, p.Lines, p.Exported, strings.Join(p.Imports, " "))
		sum, budget = sum+p.Exported, budget+limits[dir]
		if _, ok := limits[dir]; !ok {
			t.Errorf("%s has no budget in limits", dir)
		}
		if dir == "sqsapi" && len(p.Imports) > 0 {
			t.Errorf("sqsapi, the contract every package shares, imports %s: it must import no package of the module", strings.Join(p.Imports, " "))
		}
		if lim, ok := limits[dir]; ok && p.Exported > lim {
			t.Errorf("%s exports %d identifiers, more than its budget of %d: %s", dir, p.Exported, lim, strings.Join(p.Names, ", "))
		}
		for _, l := range p.InternalLeaks {
			t.Errorf("%s: exported %s", dir, l)
		}
	}
	fmt.Fprintf(&b, "%-20s %6s %8d  (budget %d; direction: under 400)\n", "total", "", sum, total)
	if sum > total || budget > total {
		t.Errorf("%d exported identifiers in all (limits sum to %d), more than the total budget of %d", sum, budget, total)
	}
	t.Log("\n" + b.String())
	if os.Getenv("APISURFACE_NAMES") != "" {
		for _, dir := range library {
			p, _ := Measure(filepath.Join(root, dir), module)
			t.Logf("%s: %s", dir, strings.Join(p.Names, " "))
		}
	}
}
