package oteltempq

import (
	"encoding/hex"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// The X-Ray trace header, as SQS carries it in the AWSTraceHeader system
// attribute: "Root=1-<8 hex: epoch seconds>-<24 hex>;Parent=<16 hex>;
// Sampled=<0|1>", with other keys (Lineage, Self) allowed and ignored. An
// X-Ray trace id is the 32 hex digits of a W3C trace id cut after 8, so
// the two map one to one.

// formatXRay returns the header naming sc as the parent.
func formatXRay(sc trace.SpanContext) string {
	tid := sc.TraceID().String()
	sampled := "0"
	if sc.IsSampled() {
		sampled = "1"
	}
	return "Root=1-" + tid[:8] + "-" + tid[8:] + ";Parent=" + sc.SpanID().String() + ";Sampled=" + sampled
}

// parseXRay reads a header; ok is false when it names no valid trace and
// parent. A header without Sampled counts as not sampled.
func parseXRay(h string) (sc trace.SpanContext, ok bool) {
	var cfg trace.SpanContextConfig
	var haveRoot, haveParent bool
	for _, part := range strings.Split(h, ";") {
		k, v, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found {
			continue
		}
		switch k {
		case "Root":
			ver, rest, ok1 := strings.Cut(v, "-")
			epoch, rnd, ok2 := strings.Cut(rest, "-")
			if !ok1 || !ok2 || ver != "1" || len(epoch) != 8 || len(rnd) != 24 {
				return trace.SpanContext{}, false
			}
			b, err := hex.DecodeString(epoch + rnd)
			if err != nil {
				return trace.SpanContext{}, false
			}
			copy(cfg.TraceID[:], b)
			haveRoot = true
		case "Parent":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != 8 {
				return trace.SpanContext{}, false
			}
			copy(cfg.SpanID[:], b)
			haveParent = true
		case "Sampled":
			if v == "1" {
				cfg.TraceFlags = trace.FlagsSampled
			}
		}
	}
	if !haveRoot || !haveParent {
		return trace.SpanContext{}, false
	}
	cfg.Remote = true
	sc = trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}
