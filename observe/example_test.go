package observe_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/observe"
)

// An Observer that counts dropped messages by reason, as a metrics
// exporter would, and ignores the rest.
func Example() {
	dropped := map[string]int{}
	var o observe.Observer = observe.Func(func(_ context.Context, e observe.Event) func(*types.Message, error) {
		if e.Kind == observe.Dropped {
			dropped[e.Reason]++
		}
		return nil
	})
	// A responder would make these calls as it works.
	o.Observe(context.Background(), observe.Event{Kind: observe.Dropped, Reason: "expired"})
	o.Observe(context.Background(), observe.Event{Kind: observe.Handled})
	o.Observe(context.Background(), observe.Event{Kind: observe.Dropped, Reason: "expired"})
	fmt.Println(dropped)
	// Output: map[expired:2]
}
