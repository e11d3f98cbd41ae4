package oteltempq

import (
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestXRayHeader(t *testing.T) {
	// The example of the X-Ray documentation's header format.
	const h = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	sc, ok := parseXRay(h)
	if !ok {
		t.Fatal("not parsed")
	}
	if sc.TraceID().String() != "5759e988bd862e3fe1be46a994272793" || sc.SpanID().String() != "53995c3f42cd8ad8" || !sc.IsSampled() || !sc.IsRemote() {
		t.Errorf("parsed %v", sc)
	}
	if got := formatXRay(sc); got != h {
		t.Errorf("formatted %q, want %q", got, h)
	}
	if sc, ok := parseXRay("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Lineage=a87bd80c:1|68fd508a:5"); !ok || sc.IsSampled() {
		t.Errorf("with Lineage and no Sampled: %v %v", sc, ok)
	}
	for _, bad := range []string{
		"", "Root=1-5759e988-bd862e3fe1be46a994272793", "Parent=53995c3f42cd8ad8",
		"Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
		"Root=1-5759e98-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
		"Root=1-5759e988-bd862e3fe1be46a99427279z;Parent=53995c3f42cd8ad8",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8a",
		"Root=1-00000000-000000000000000000000000;Parent=53995c3f42cd8ad8",
	} {
		if _, ok := parseXRay(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	var cfg trace.SpanContextConfig
	cfg.TraceID[0], cfg.SpanID[0] = 1, 2
	if got := formatXRay(trace.NewSpanContext(cfg)); got != "Root=1-01000000-000000000000000000000000;Parent=0200000000000000;Sampled=0" {
		t.Errorf("unsampled: %q", got)
	}
}
