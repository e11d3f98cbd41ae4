package payload

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/internal/testkit/testbody"
)

// benchSizes are the body sizes the benchmarks measure: from Threshold
// up; BenchmarkLevel adds 1 KiB, for gzip's fixed cost.
var benchSizes = []int{Threshold, 16 << 10, 64 << 10, 256 << 10, 1 << 20}

var benchKinds = []struct {
	name string
	make func(int, uint64) string
}{{"json", testbody.JSON}, {"text", testbody.Text}, {"random", testbody.Random}}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// BenchmarkEncode measures Encode, the sender's cost per body, and
// reports the carrier's size as a share of the body's (ratio; 1 when it
// stays plain).
func BenchmarkEncode(b *testing.B) {
	for _, k := range benchKinds {
		for _, n := range benchSizes {
			body := k.make(n, 1)
			b.Run(k.name+"/"+sizeName(n), func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				size := n
				for b.Loop() {
					attrs := map[string]types.MessageAttributeValue{}
					if _, ok := Encode(body, attrs, 1); ok {
						size = carrierBytes + len(attrs["TempQueues.Body"].BinaryValue)
					}
				}
				b.ReportMetric(float64(size)/float64(n), "ratio")
			})
		}
	}
}

// BenchmarkDecode measures Decode of a compressed body, the receiver's
// cost per body.
func BenchmarkDecode(b *testing.B) {
	for _, k := range benchKinds[:2] {
		for _, n := range benchSizes {
			m := encoded(b, k.make(n, 1))
			b.Run(k.name+"/"+sizeName(n), func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := Decode(m); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkLevel compares gzip's levels on the bodies Encode sees: the
// measurement behind Level (docs/wire.md, "Compression"). ratio is the
// compressed size over the body's.
func BenchmarkLevel(b *testing.B) {
	for _, level := range []struct {
		name  string
		level int
	}{{"BestSpeed", gzip.BestSpeed}, {"Default", gzip.DefaultCompression}, {"HuffmanOnly", gzip.HuffmanOnly}} {
		for _, k := range benchKinds[:2] {
			for _, n := range append([]int{1 << 10}, benchSizes...) {
				body := k.make(n, 1)
				b.Run(level.name+"/"+k.name+"/"+sizeName(n), func(b *testing.B) {
					w, _ := gzip.NewWriterLevel(io.Discard, level.level)
					var buf bytes.Buffer
					b.SetBytes(int64(n))
					for b.Loop() {
						buf.Reset()
						w.Reset(&buf)
						_, _ = io.WriteString(w, body)
						_ = w.Close()
					}
					b.ReportMetric(float64(buf.Len())/float64(n), "ratio")
				})
			}
		}
	}
}
