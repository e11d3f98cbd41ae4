package sqsgrpc

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"

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

// callInfo is what a call's options ask for.
type callInfo struct {
	codec    codec
	codecErr error
	headers  []*metadata.MD
	trailers []*metadata.MD
}

// callOptions applies the call options this transport understands: the
// codec (ForceCodec, ForceCodecV2, CallContentSubtype) and where to put the
// header and the trailer (Header, Trailer). The others (compression,
// credentials, wait-for-ready, message size limits of HTTP/2) have no
// meaning over SQS and are ignored.
func callOptions(opts []grpc.CallOption) *callInfo {
	ci := &callInfo{}
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
		}
	}
	if forced.name != "" {
		ci.codec = forced // its name is the content subtype the server looks up
	} else {
		ci.codec, ci.codecErr = codecFor(subtype)
	}
	return ci
}
