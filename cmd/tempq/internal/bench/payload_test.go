package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/sqsapi"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"1KiB": 1 << 10, "64KiB": 64 << 10, "256KiB": 256 << 10, "1MiB": 1 << 20,
		"4MiB": 4 << 20, "16MiB": 16 << 20, "1000": 1000, " 100B": 100, "64": 64} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
		if err == nil && strings.TrimSpace(in) != "1000" && strings.TrimSpace(in) != "100B" && strings.TrimSpace(in) != "64" && FormatSize(got) != strings.TrimSpace(in) {
			t.Errorf("FormatSize(%d) = %q, want %q", got, FormatSize(got), in)
		}
	}
	for _, in := range []string{"", "64KB", "1GiB", "65MiB", "-1KiB", "0", "63", "1.5MiB", "KiB", "9999999999999MiB"} {
		if n, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, n)
		}
	}
	if _, err := ParseKinds("json,xml"); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("ParseKinds(json,xml): %v", err)
	}
	ps, err := ParsePayloads("1KiB,64KiB", []string{PayloadJSON, PayloadBinary})
	if err != nil || len(ps) != 4 || ps[1] != (Payload{Kind: PayloadBinary, Bytes: 1 << 10}) || ps[3].Label() != "64KiB binary" {
		t.Errorf("ParsePayloads: %+v, %v", ps, err)
	}
	shapes, err := ParseShapes("echo,reply")
	if err != nil || len(shapes) != 2 {
		t.Fatalf("ParseShapes(echo,reply) = %v, %v", shapes, err)
	}
	if _, err := ParseShapes("echo,stream"); err == nil || !strings.Contains(err.Error(), `"stream"`) {
		t.Errorf("ParseShapes(echo,stream): %v", err)
	}
	ps, err = ParsePayloads("64KiB", []string{PayloadJSON}, shapes...)
	if err != nil || len(ps) != 2 || ps[0].Label() != "64KiB json" || ps[1].Label() != "64KiB json reply" || !ps[1].replyOnly() || ps[0].replyOnly() {
		t.Errorf("ParsePayloads with shapes: %+v, %v", ps, err)
	}
}

// TestReplyShape checks what a caller sends, a responder answers and the
// caller expects in each shape: the payload both ways in an echo; in the
// reply shape the tiny body up and its caller's payload down.
func TestReplyShape(t *testing.T) {
	e := &env{}
	p := Payload{Kind: PayloadJSON, Bytes: 1 << 10}
	e.usePayload(p, 3)
	if req := e.request(2); req != p.Body(2) || e.reply(req) != p.Body(2) || e.body(2) != p.Body(2) {
		t.Errorf("echo: request %.20q, reply %.20q", req, e.reply(req))
	}
	p.Shape = ShapeReply
	e.usePayload(p, 3)
	if req := e.request(2); req != "ping 2" || e.reply(req) != p.Body(2) || e.body(2) != p.Body(2) {
		t.Errorf("reply shape: request %.20q, reply %.20q", req, e.reply(req))
	}
	if got := e.reply("ping 7"); got != "ping 7" {
		t.Errorf("reply to a caller out of range: %.20q, want the request back (so that the check fails)", got)
	}
	e.usePayload(Payload{}, 0)
	if e.request(1) != "ping 1" || e.reply("ping 1") != "ping 1" || e.body(1) != "ping 1" {
		t.Error("the tiny body is not echoed")
	}
}

// TestPayloadBodies: JSON bodies are valid JSON of exactly the size, binary
// ones the base64 of exactly the size of random bytes; both the same from
// run to run, and different for every caller.
func TestPayloadBodies(t *testing.T) {
	for _, n := range []int{MinPayloadBytes, 65, 100, 1000, 1 << 10, 64 << 10, 256<<10 + 7, 1 << 20} {
		p := Payload{Kind: PayloadJSON, Bytes: n}
		seen := map[string]bool{}
		for caller := range 3 {
			b := p.Body(caller)
			if len(b) != n || len(b) != p.BodyBytes() || !json.Valid([]byte(b)) {
				t.Fatalf("JSON body of %d bytes for caller %d: %d bytes, valid %v: %.200s", n, caller, len(b), json.Valid([]byte(b)), b)
			}
			if p.Body(caller) != b || seen[b] {
				t.Errorf("JSON body of %d bytes for caller %d: not deterministic, or another caller's", n, caller)
			}
			seen[b] = true
		}
		if n >= 1<<10 && !strings.Contains(p.Body(0), `"email":"`) {
			t.Errorf("JSON body of %d bytes holds no record: %.200s", n, p.Body(0))
		}
		q := Payload{Kind: PayloadBinary, Bytes: n}
		b := q.Body(1)
		raw, err := base64.StdEncoding.DecodeString(b)
		if err != nil || len(b) != q.BodyBytes() || !bytes.Equal(raw, q.Raw(1)) || len(raw) != n || bytes.Equal(raw, q.Raw(2)) {
			t.Errorf("binary body of %d bytes: %d bytes, decoded %d (%v)", n, len(b), len(raw), err)
		}
	}
	if (Payload{}).Body(7) != "ping 7" || (Payload{}).Label() != "" {
		t.Errorf("the default body is %q", Payload{}.Body(7))
	}
}

// echoFake is a fake contender that sends its env's body, refuses one over
// limit bytes as the requester does, and checks the reply as the real
// ones do.
type echoFake struct {
	fake
	e     *env
	limit int
	calls *atomic.Int64
}

func (f *echoFake) call(ctx context.Context, caller int) (time.Duration, error) {
	f.calls.Add(1)
	b := f.e.body(caller)
	if len(b) > f.limit {
		return 0, &sqsapi.InvalidInputError{Op: "fake", Param: "MessageBody", Reason: "too large"}
	}
	if err := sleep(ctx, 100*time.Microsecond); err != nil {
		return 0, err
	}
	reply := b
	return time.Millisecond, checkReply(b, &reply)
}

// TestRunPayloads runs every payload in every visit: a body over SQS's
// maximum is refused without a call, one the contender refuses for its
// size on its first call is refused too, and the others are measured and
// tabled per payload.
func TestRunPayloads(t *testing.T) {
	v := new(visits)
	var calls atomic.Int64
	cfg := Config{
		NewClient:   func(*callcount.Counter) *sqs.Client { return sqs.New(sqs.Options{}) },
		Contenders:  []string{TempQueues},
		Concurrency: []int{1, 2},
		Rounds:      2,
		Duration:    20 * time.Millisecond,
		Payloads:    []Payload{{Kind: PayloadJSON, Bytes: 1 << 10}, {Kind: PayloadBinary, Bytes: 600 << 10}, {Kind: PayloadJSON, Bytes: 2 << 20}},
	}
	rep, err := run(context.Background(), cfg, func(name string, e *env, _ *sqs.Client) contender {
		return &echoFake{fake: fake{n: name, v: v}, e: e, limit: 512 << 10, calls: &calls}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 6 || len(rep.Payloads) != 3 {
		t.Fatalf("%d results, %d payloads: %+v", len(rep.Results), len(rep.Payloads), rep.Results)
	}
	for _, res := range rep.Results {
		switch res.Payload {
		case "1KiB json":
			if res.Refused != "" || res.RPCs == 0 || res.Errors != 0 || res.BodyBytes != 1<<10 {
				t.Errorf("1KiB json: %+v", res)
			}
		case "600KiB binary":
			if !strings.Contains(res.Refused, "too large") || res.RPCs != 0 || res.BodyBytes != 819200 {
				t.Errorf("600KiB binary, 800 KiB in base64: %+v, want refused by the contender", res)
			}
		case "2MiB json":
			if !strings.Contains(res.Refused, "over SQS's maximum message size") || res.RPCs != 0 {
				t.Errorf("2MiB json: %+v, want refused before any call", res)
			}
		default:
			t.Errorf("result of payload %q", res.Payload)
		}
	}
	// The 600 KiB payload was tried once, in the first visit only; the
	// 2 MiB one never.
	var measured int64
	for _, conc := range cfg.Concurrency {
		measured += rep.FindPayload(TempQueues, "1KiB json", conc).RPCs
	}
	// Each visit also probes the 1 KiB payload once.
	if tried := calls.Load() - measured - int64(cfg.Rounds); tried != 1 {
		t.Errorf("%d calls beyond the measured ones and the probes, want the one that found the 600 KiB payload refused", tried)
	}
	if rep.Find(TempQueues, 1) != rep.FindPayload(TempQueues, "1KiB json", 1) || len(Targets(rep)) != 0 {
		t.Errorf("Find does not find the first payload, or targets judged a run with payloads")
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### payload 1KiB json: a body of 1024 bytes (JSON text)",
		"### payload 600KiB binary: a body of 819200 bytes (614400 random bytes in base64)",
		"| tempqueues | 2 | refused (over 1 MiB) | | | | | | | | | | | |\n",
		"- tempqueues, refused (over 1 MiB): a body of 2097152 bytes is over SQS's maximum message size, 1048576 bytes",
		"| API calls/RPC | billed requests/RPC | S3 calls/RPC | $ per million RPCs | S3 $ per million RPCs | wire KiB/RPC | S3 KiB/RPC |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
