package wire

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/sqsapi"
)

type tagger interface {
	TagQueue(context.Context, *sqs.TagQueueInput, ...func(*sqs.Options)) (*sqs.TagQueueOutput, error)
}

type funcClient func()

type valueClient struct{}

func TestCheckClient(t *testing.T) {
	var nilIface tagger
	var typedNil tagger = (*sqs.Client)(nil)
	for name, c := range map[string]any{
		"nil":                nil,
		"nil interface":      nilIface,
		"typed nil pointer":  (*sqs.Client)(nil),
		"typed nil in iface": typedNil,
		"nil func":           funcClient(nil),
		"nil map":            map[string]int(nil),
		"nil chan":           (chan int)(nil),
		"nil slice":          []int(nil),
	} {
		err := CheckClient("op", "client", c)
		var ie *sqsapi.InvalidInputError
		if !errors.Is(err, sqsapi.ErrInvalidInput) || !errors.As(err, &ie) || ie.Op != "op" || ie.Param != "client" {
			t.Errorf("%s: err = %v, want an InvalidInputError on client", name, err)
		}
	}
	for name, c := range map[string]any{
		"client":     sqs.New(sqs.Options{}),
		"func":       funcClient(func() {}),
		"value type": valueClient{},
		"map":        map[string]int{},
	} {
		if err := CheckClient("op", "client", c); err != nil {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}
