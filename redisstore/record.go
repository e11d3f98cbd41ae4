package redisstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tempqueues/tempqueues/responder"
)

// Values stored under a request's key. The scripts look at the tag only.
const (
	// lockTag starts a lease: "L:" followed by the owner's token.
	lockTag = "L:"
	// doneTag starts an answer: "D" followed by the JSON of a record.
	doneTag = "D"
)

// recordVersion is the version of the answer format written; decoding
// accepts this version only and reports any other as ErrBadRecord, so that
// an older release never misreads a newer release's answers.
const recordVersion = 1

// record is an answer as stored: format version 1.
//
//	{"v":1}                                  the handler returned no reply
//	{"v":1,"reply":{"body":"...","attrs":[{"name":"n","type":"Binary","b":"AAE="}]}}
//
// Attributes are listed in name order. Strings that are not valid UTF-8
// are written as {"b64":"..."} so that every byte survives; binary values
// are base64.
type record struct {
	V     int        `json:"v"`
	Reply *replyJSON `json:"reply,omitempty"`
}

type replyJSON struct {
	Body  text       `json:"body"`
	Attrs []attrJSON `json:"attrs,omitempty"`
}

// attrJSON is a types.MessageAttributeValue: its DataType ("String",
// "Number", "Binary", with any custom ".label") and the value fields SQS
// defines, including the list fields it reserves.
type attrJSON struct {
	Name       text     `json:"name"`
	Type       text     `json:"type"`
	String     *text    `json:"s,omitempty"`
	Binary     []byte   `json:"b,omitempty"`
	StringList []text   `json:"sl,omitempty"`
	BinaryList [][]byte `json:"bl,omitempty"`
}

// text is a string that survives JSON whatever its bytes: valid UTF-8 is a
// JSON string, anything else {"b64": base64 of the bytes}.
type text string

func (t text) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(t)) {
		return json.Marshal(string(t))
	}
	return json.Marshal(struct {
		B64 []byte `json:"b64"`
	}{[]byte(t)})
}

func (t *text) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = text(s)
		return nil
	}
	var raw struct {
		B64 *[]byte `json:"b64"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw.B64 == nil {
		return errors.New("text is neither a string nor {\"b64\": ...}")
	}
	*t = text(*raw.B64)
	return nil
}

// encodeDone returns the stored value of an answer: doneTag and the JSON
// record.
func encodeDone(r *responder.Reply) (string, error) {
	rec := record{V: recordVersion}
	if r != nil {
		rec.Reply = &replyJSON{Body: text(r.Body)}
		for _, name := range slices.Sorted(maps.Keys(r.Attributes)) {
			v := r.Attributes[name]
			a := attrJSON{Name: text(name), Type: text(aws.ToString(v.DataType)), Binary: v.BinaryValue, BinaryList: v.BinaryListValues}
			if v.StringValue != nil {
				s := text(*v.StringValue)
				a.String = &s
			}
			for _, s := range v.StringListValues {
				a.StringList = append(a.StringList, text(s))
			}
			rec.Reply.Attrs = append(rec.Reply.Attrs, a)
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return "", fmt.Errorf("redisstore: encoding reply: %w", err)
	}
	return doneTag + string(b), nil
}

// decodeDone parses a stored answer (doneTag included). The reply it
// returns shares nothing with other callers.
func decodeDone(v string) (*responder.Reply, error) {
	if len(v) < len(doneTag) || v[:len(doneTag)] != doneTag {
		return nil, errors.New("not an answer")
	}
	var rec record
	if err := json.Unmarshal([]byte(v[len(doneTag):]), &rec); err != nil {
		return nil, err
	}
	if rec.V != recordVersion {
		return nil, fmt.Errorf("record format version %d, this release reads version %d", rec.V, recordVersion)
	}
	if rec.Reply == nil {
		return nil, nil
	}
	r := &responder.Reply{Body: string(rec.Reply.Body)}
	if len(rec.Reply.Attrs) > 0 {
		r.Attributes = make(map[string]types.MessageAttributeValue, len(rec.Reply.Attrs))
	}
	for _, a := range rec.Reply.Attrs {
		v := types.MessageAttributeValue{DataType: aws.String(string(a.Type)), BinaryValue: a.Binary, BinaryListValues: a.BinaryList}
		if a.String != nil {
			v.StringValue = aws.String(string(*a.String))
		}
		for _, s := range a.StringList {
			v.StringListValues = append(v.StringListValues, string(s))
		}
		r.Attributes[string(a.Name)] = v
	}
	return r, nil
}
