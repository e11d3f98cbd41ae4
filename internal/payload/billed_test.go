package payload

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/wire"
	"github.com/tempqueues/tempqueues/sqsapi"
)

// billed is what SQS bills for a message of n bytes sent alone, or
// received alone: each started 64 KiB.
func billed(n int) int { return (n + 64<<10 - 1) / (64 << 10) }

// TestCompressionSavesBilledRequests measures what a reply costs on the
// wire before and after compression, with the attributes a responder
// puts on a reply to a requester (the routing name and the correlation
// id), and checks that large JSON and text replies cost fewer billed
// requests. go test -v prints the table of docs/cost.md.
func TestCompressionSavesBilledRequests(t *testing.T) {
	t.Parallel()
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-6s %8s %12s %12s %8s %8s\n", "kind", "size", "plain bytes", "sent bytes", "billed", "after")
	for _, k := range benchKinds {
		for _, n := range []int{16 << 10, 64 << 10, 256 << 10, 1 << 20, 3 << 20} {
			body := k.make(n, 1)
			attrs := map[string]types.MessageAttributeValue{
				sqsapi.VirtualQueueNameAttribute: wire.StringAttribute("0b7f2c1e-8a44-4e0c-9d51-5f3c2a7b9e10"),
				sqsapi.CorrelationIDAttribute:    wire.StringAttribute("0b7f2c1e-8a44-4e0c-9d51-5f3c2a7b9e10"),
			}
			plain := wire.MessageSize(aws.String(body), attrs)
			sent, _ := Encode(body, attrs, 1)
			after := wire.MessageSize(aws.String(sent), attrs)
			before := "-"
			if plain <= sqsapi.MaxMessageSize {
				before = fmt.Sprint(billed(plain))
			}
			afterBilled := "-"
			if after <= sqsapi.MaxMessageSize {
				afterBilled = fmt.Sprint(billed(after))
			}
			fmt.Fprintf(&table, "%-6s %8s %12d %12d %8s %8s\n", k.name, sizeName(n), plain, after, before, afterBilled)
			if after > plain {
				t.Errorf("%s %s: %d bytes sent, more than %d plain", k.name, sizeName(n), after, plain)
			}
			if k.name != "random" && n >= 256<<10 && after <= sqsapi.MaxMessageSize && billed(after) >= billed(plain) {
				t.Errorf("%s %s: %d billed requests compressed, %d plain", k.name, sizeName(n), billed(after), billed(plain))
			}
			// Random bytes over the sample are compressed only for a
			// chunk less, counted with the message's attributes: at 64
			// and 256 KiB they take the body into one chunk more, which
			// compressed saves.
			if k.name == "random" && n > sampleAfter && after < plain && billed(after) >= billed(plain) {
				t.Errorf("random %s: compressed for no chunk saved (%d billed)", sizeName(n), billed(after))
			}
			if k.name == "random" && (n == 64<<10 || n == 256<<10) && billed(after) >= billed(plain) {
				t.Errorf("random %s: %d billed requests sent, %d plain: a chunk was there to save", sizeName(n), billed(after), billed(plain))
			}
		}
	}
	t.Log(table.String())
}
