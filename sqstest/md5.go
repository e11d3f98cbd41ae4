package sqstest

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"sort"
	"strings"

	"github.com/tempqueues/tempqueues/sqstest/internal/api"
)

// md5Hex is MD5OfMessageBody: the hex MD5 of the body's UTF-8 bytes.
func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// md5OfAttributes is MD5OfMessageAttributes as AWS computes it: over the
// attributes sorted by name, each encoded as length-prefixed (4-byte big
// endian) name, length-prefixed data type, one transport byte (1 for String
// and Number, 2 for Binary) and the length-prefixed value. Empty for no
// attributes, which the response then omits.
func md5OfAttributes(attrs map[string]api.AttrValue) string {
	if len(attrs) == 0 {
		return ""
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	h := md5.New()
	var lenBuf [4]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint32(lenBuf[:], uint32(len(b)))
		h.Write(lenBuf[:])
		h.Write(b)
	}
	for _, n := range names {
		v := attrs[n]
		put([]byte(n))
		put([]byte(v.DataType))
		if strings.HasPrefix(v.DataType, "Binary") {
			h.Write([]byte{2})
			put(v.BinaryValue)
		} else {
			h.Write([]byte{1})
			var sv string
			if v.StringValue != nil {
				sv = *v.StringValue
			}
			put([]byte(sv))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
