package observe_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
)

func TestJoinOrder(t *testing.T) {
	var got []string
	mk := func(name string) observe.Observer {
		return observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
			got = append(got, name+" "+e.Kind.String())
			if e.Kind != observe.Send {
				return nil
			}
			return func(_ *types.Message, err error) { got = append(got, name+" done "+err.Error()) }
		})
	}
	o := observe.Join(nil, mk("a"), observe.Join(mk("b"), nil), mk("c"))
	if d := o.Observe(context.Background(), observe.Event{Kind: observe.Dropped}); d != nil {
		t.Fatal("a Dropped event returned a done func although no observer gave one")
	}
	o.Observe(context.Background(), observe.Event{Kind: observe.Send})(nil, errors.New("x"))
	want := []string{"a dropped", "b dropped", "c dropped", "a send", "b send", "c send", "c done x", "b done x", "a done x"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	if observe.Join(nil, nil) != nil {
		t.Fatal("Join of nils is not nil")
	}
	one := mk("one")
	if reflect.ValueOf(observe.Join(one)).Pointer() != reflect.ValueOf(one).Pointer() {
		t.Fatal("Join of one observer wraps it")
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[observe.Kind]string{observe.Send: "send", observe.Measured: "measured", 0: "unknown", 99: "unknown"} {
		if k.String() != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, k.String(), want)
		}
	}
}
