package sqsgrpc

import (
	"fmt"
	"math"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	// Registers the proto codec, the default.
	_ "google.golang.org/grpc/encoding/proto"
)

// codec marshals messages with a grpc codec of either generation.
type codec struct {
	name string
	v1   encoding.Codec
	v2   encoding.CodecV2
}

func (c codec) marshal(v any) ([]byte, error) {
	if c.v1 != nil {
		return c.v1.Marshal(v)
	}
	bs, err := c.v2.Marshal(v)
	if err != nil {
		return nil, err
	}
	defer bs.Free()
	return bs.Materialize(), nil
}

func (c codec) unmarshal(data []byte, v any) error {
	if c.v1 != nil {
		return c.v1.Unmarshal(data, v)
	}
	return c.v2.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, v)
}

// codecFor returns the registered codec of a content subtype.
func codecFor(subtype string) (codec, error) {
	if c := encoding.GetCodecV2(subtype); c != nil {
		return codec{name: subtype, v2: c}, nil
	}
	if c := encoding.GetCodec(subtype); c != nil {
		return codec{name: subtype, v1: c}, nil
	}
	return codec{}, fmt.Errorf("no codec registered for content subtype %q", subtype)
}

// grpc's defaults for message sizes, which sqsgrpc keeps: a message
// received may have 4 MiB, one sent any size (up to what SQS, or a
// payload store, carries).
const (
	defaultMaxRecv = 4 << 20
	defaultMaxSend = math.MaxInt32
)

// callInfo is what a call's options ask for.
type callInfo struct {
	codec    codec
	codecErr error
	headers  []*metadata.MD
	trailers []*metadata.MD
	maxRecv  int // grpc.MaxCallRecvMsgSize
	maxSend  int // grpc.MaxCallSendMsgSize
}

// recvTooLarge is the status error of a message received past max bytes,
// as grpc words it.
func recvTooLarge(n, max int) error {
	return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, max)
}

// sendTooLarge is the status error of a message to send past max bytes,
// as grpc words it.
func sendTooLarge(n, max int) error {
	return status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", n, max)
}

// callOptions applies the call options this transport understands: the
// codec (ForceCodec, ForceCodecV2, CallContentSubtype), where to put the
// header and the trailer (Header, Trailer) and the largest messages
// (MaxCallRecvMsgSize, MaxCallSendMsgSize). The others (compression,
// credentials, wait-for-ready) have no meaning over SQS and are ignored.
func callOptions(opts []grpc.CallOption) *callInfo {
	ci := &callInfo{maxRecv: defaultMaxRecv, maxSend: defaultMaxSend}
	subtype := "proto"
	var forced codec
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.ContentSubtypeCallOption:
			subtype = o.ContentSubtype
		case grpc.ForceCodecCallOption:
			forced = codec{name: o.Codec.Name(), v1: o.Codec}
		case grpc.ForceCodecV2CallOption:
			forced = codec{name: o.CodecV2.Name(), v2: o.CodecV2}
		case grpc.HeaderCallOption:
			ci.headers = append(ci.headers, o.HeaderAddr)
		case grpc.TrailerCallOption:
			ci.trailers = append(ci.trailers, o.TrailerAddr)
		case grpc.MaxRecvMsgSizeCallOption:
			ci.maxRecv = o.MaxRecvMsgSize
		case grpc.MaxSendMsgSizeCallOption:
			ci.maxSend = o.MaxSendMsgSize
		}
	}
	if forced.name != "" {
		ci.codec = forced // its name is the content subtype the server looks up
	} else {
		ci.codec, ci.codecErr = codecFor(subtype)
	}
	return ci
}
