// Package testbody makes message bodies of a given size for tests and
// benchmarks of compression: JSON as an API returns it, log text, and
// random bytes in base64 (binary data as it travels in an SQS body). Each
// is deterministic for its seed, of exactly the size asked, and text SQS
// accepts.
package testbody

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
)

// words are what names, tags and text are made of.
var words = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima
mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu
order invoice customer account payment shipment warehouse product catalog price discount
pending active closed refunded express standard priority north south east west central
london paris berlin madrid rome vienna dublin lisbon oslo helsinki warsaw prague athens
request response queue message session stream reply handler worker retry timeout deadline`)

// JSON returns size bytes of a JSON array of records such as an API
// returns (ids, names, e-mail addresses, timestamps, amounts, tags, a
// nested address), padded with spaces before its closing bracket.
func JSON(size int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0x6a736f6e))
	var b strings.Builder
	b.Grow(size)
	b.WriteByte('[')
	for n := 0; ; n++ {
		rec := record(rng, n)
		if b.Len()+len(rec)+2 > size {
			break
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(rec)
	}
	for b.Len() < size-1 {
		b.WriteByte(' ')
	}
	b.WriteByte(']')
	return b.String()[:size]
}

func record(rng *rand.Rand, n int) string {
	first, last := word(rng), word(rng)
	tags := make([]string, 1+rng.IntN(4))
	for i := range tags {
		tags[i] = fmt.Sprintf("%q", word(rng))
	}
	return fmt.Sprintf(`{"id":%d,"orderId":"ord-%08x","customer":{"name":"%s %s","email":"%s.%s@example.com","tier":%q},`+
		`"status":%q,"createdAt":"2025-%02d-%02dT%02d:%02d:%02d.%03dZ","amount":%d.%02d,"currency":"EUR","items":%d,`+
		`"tags":[%s],"address":{"city":%q,"zone":%q,"postcode":"%05d"},"active":%t}`,
		100000+n, rng.Uint32(), first, last, first, last, word(rng),
		word(rng), 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1000), rng.IntN(5000), rng.IntN(100), 1+rng.IntN(20),
		strings.Join(tags, ","), word(rng), word(rng), rng.IntN(100000), rng.IntN(2) == 0)
}

// word draws a word, the first ones more often (about as in prose).
func word(rng *rand.Rand) string {
	i := int(float64(len(words)) * rng.Float64() * rng.Float64())
	return words[i]
}

// Text returns size bytes of log lines: a timestamp, a level, a
// component and a message of words and numbers.
func Text(size int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0x74657874))
	levels := []string{"INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"}
	var b strings.Builder
	b.Grow(size + 200)
	for b.Len() < size {
		fmt.Fprintf(&b, "2025-06-%02d %02d:%02d:%02d.%03d %-5s [%s-%s] ", 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1000),
			levels[rng.IntN(len(levels))], word(rng), word(rng))
		for i, n := 0, 5+rng.IntN(12); i < n; i++ {
			if i > 0 {
				b.WriteByte(' ')
			}
			if rng.IntN(6) == 0 {
				fmt.Fprintf(&b, "%d", rng.IntN(100000))
			} else {
				b.WriteString(word(rng))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()[:size]
}

// Random returns size bytes of standard base64 of random bytes: binary
// data as a body carries it, which gzip shrinks only by base64's third.
func Random(size int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0x72616e64))
	raw := make([]byte, size/4*3+3)
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	return base64.StdEncoding.EncodeToString(raw)[:size]
}
