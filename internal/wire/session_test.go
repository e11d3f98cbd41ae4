package wire

import (
	"testing"
	"time"
)

func TestStreamPositionsRoundTrip(t *testing.T) {
	for _, p := range []StreamPos{{}, {Seq: 7}, {Seq: 3, Mark: MarkFinal}, {Seq: 0, Mark: MarkEnd, Credit: 32}, {Seq: 12, Credit: 44}, {Seq: 4, Mark: MarkFinal, Run: "1a2b3c4d"}} {
		got, ok := ParseStream(FormatStream(p))
		if !ok || got != p {
			t.Errorf("%+v: %q parses as %+v, %v", p, FormatStream(p), got, ok)
		}
	}
	// What versions before credit sent, and what a later one might add.
	for v, want := range map[string]StreamPos{
		"5":                    {Seq: 5},
		"2;final":              {Seq: 2, Mark: MarkFinal},
		"2;end":                {Seq: 2, Mark: MarkEnd},
		"4;credit=40;future=1": {Seq: 4, Credit: 40},
		"4;credit=-3":          {Seq: 4},
	} {
		if got, ok := ParseStream(v); !ok || got != want {
			t.Errorf("%q parses as %+v, %v; want %+v", v, got, ok, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1.5;final", ";final"} {
		if _, ok := ParseStream(bad); ok {
			t.Errorf("%q parses", bad)
		}
	}
}

func TestSessionRequestsRoundTrip(t *testing.T) {
	for _, a := range []SessionAsk{{Credit: 32}, {Credit: 32, End: true}, {Credit: 8, Idle: 1500 * time.Millisecond}, {Credit: 32, End: true, Idle: time.Minute}} {
		got, ok := ParseSessionRequest(SessionRequest(a))
		if !ok || got != a {
			t.Errorf("%+v: %q parses as %+v, %v", a, SessionRequest(a), got, ok)
		}
	}
	for _, v := range []string{"1", "", "sessions;credit=1", "1;session"} {
		if _, ok := ParseSessionRequest(v); ok {
			t.Errorf("%q asks for a session", v)
		}
	}
	if a, ok := ParseSessionRequest("session;idle=99999999999;credit=0"); !ok || a.Idle != 0 || a.Credit != 0 {
		t.Errorf("out-of-range values: %+v, %v", a, ok)
	}
}

func TestControlsRoundTrip(t *testing.T) {
	for _, c := range []Control{
		{Verb: ControlOpen, Credit: 32, URL: "http://127.0.0.1:4566/000000000000/q#0b6b2c1e"},
		{Verb: ControlCredit, Credit: 48},
		{Verb: ControlPing},
		{Verb: ControlCancel},
		{Verb: ControlAbort, Reason: "the responder is shutting down"},
	} {
		got, ok := ParseControl(c.Format())
		if !ok || got != c {
			t.Errorf("%+v: %q parses as %+v, %v", c, c.Format(), got, ok)
		}
	}
	for _, bad := range []string{"", "open", "open 32", "open x http://h/q#n", "open 32 http://h/q", "credit", "credit 0", "stop"} {
		if _, ok := ParseControl(bad); ok {
			t.Errorf("%q parses", bad)
		}
	}
}

// The parsers take what any sender put in an attribute: they must not
// panic, and what they accept must format back to a value they accept
// the same.
func FuzzSessionValues(f *testing.F) {
	for _, s := range []string{"5", "2;final;credit=40", "session;credit=32;end;idle=60000", "open 32 http://h/q#n", "credit 9", "abort why", "ping", ";;", "open -1 #"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if p, ok := ParseStream(v); ok {
			if again, ok := ParseStream(FormatStream(p)); !ok || again != p {
				t.Errorf("%q: %+v formats to %q, which parses as %+v", v, p, FormatStream(p), again)
			}
		}
		if a, ok := ParseSessionRequest(v); ok {
			if again, ok := ParseSessionRequest(SessionRequest(a)); !ok || again.End != a.End || again.Idle != a.Idle || a.Credit > 0 && again.Credit != a.Credit {
				t.Errorf("%q: %+v formats to %q, which parses as %+v", v, a, SessionRequest(a), again)
			}
		}
		if c, ok := ParseControl(v); ok {
			if again, ok := ParseControl(c.Format()); !ok || again != c {
				t.Errorf("%q: %+v formats to %q, which parses as %+v", v, c, c.Format(), again)
			}
		}
	})
}
