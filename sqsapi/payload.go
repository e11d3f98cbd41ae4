package sqsapi

import (
	"context"
	"errors"
)

// PayloadStore keeps the bodies too large for one SQS message, in the
// format of AWS's SQS extended clients (docs/wire.md, "Payloads in S3"):
// the message carries a pointer to the object, and its reader gets the
// body from the store. requester.Options.PayloadStore and
// responder.Options.PayloadStore take one; the nested module s3payload
// provides one on Amazon S3. Its methods are safe for concurrent use.
type PayloadStore interface {
	// Put stores body under key and returns the bucket it went to. Its
	// error names the bucket. As io.Writer's Write, Put must not modify
	// body, even for a moment, nor keep it after it returns: the library
	// passes a body's bytes without copying them.
	Put(ctx context.Context, key string, body []byte) (bucket string, err error)
	// Get returns the body stored in bucket under key. The slice is the
	// caller's, and the store must never change it afterwards: the
	// library reads it as the body without copying it. An object that
	// does not exist is an error matching ErrPayloadNotFound; any other
	// error names the bucket.
	Get(ctx context.Context, bucket, key string) ([]byte, error)
	// Delete removes the object; one that does not exist is no error.
	Delete(ctx context.Context, bucket, key string) error
}

var (
	// ErrPayloadNotFound is matched by the error of a message whose
	// pointer names an object its store does not have: deleted already, or
	// expired. A request that gets it fails, and its queue's redrive
	// policy dead-letters it.
	ErrPayloadNotFound = errors.New("the payload's object is not in its store")
	// ErrNoPayloadStore is matched by the error of a message that points
	// to a payload in S3 when no PayloadStore is set to read it, and of a
	// body too large for one message with no PayloadStore to put it in.
	ErrNoPayloadStore = errors.New("the payload is in S3 and no PayloadStore is set (Options.PayloadStore)")
)
