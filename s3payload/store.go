package s3payload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/tempqueues/tempqueues/sqsapi"
)

// MaxObjectSize is the largest object Get reads: the largest body a
// requester or responder puts, 64 MiB. A larger one is an error.
const MaxObjectSize = 64 << 20

// DefaultPartSize is the default of Options.PartSize.
const DefaultPartSize = 8 << 20

// minPartSize is S3's smallest part but the last.
const minPartSize = 5 << 20

// partsInFlight bounds the parts of one object uploaded at once.
const partsInFlight = 4

// Options are the settings of a Store.
type Options struct {
	// PartSize is the size of the parts of a multipart upload: a body
	// larger than it is uploaded in parts, up to four at a time (faster
	// on S3, and emulators that cap a request's size take it), a smaller
	// one with one PutObject. At least 5 MiB, S3's smallest part; default
	// (0) DefaultPartSize, 8 MiB.
	PartSize int
}

// Store is an sqsapi.PayloadStore on one S3 bucket. It is safe for
// concurrent use.
type Store struct {
	client *s3.Client
	bucket string
	opts   Options
}

var _ sqsapi.PayloadStore = (*Store)(nil)

// New returns a Store that puts objects in bucket through client. It
// makes no call: a bucket that does not exist, or that the credentials
// cannot write, fails the first Put with an error naming it.
func New(client *s3.Client, bucket string, optFns ...func(*Options)) (*Store, error) {
	if client == nil {
		return nil, &sqsapi.InvalidInputError{Op: "s3payload.New", Param: "client", Reason: "nil"}
	}
	if !validBucket(bucket) {
		return nil, &sqsapi.InvalidInputError{Op: "s3payload.New", Param: "bucket", Reason: fmt.Sprintf("%q is not an S3 bucket name (3 to 63 lowercase letters, digits, dots and hyphens)", bucket)}
	}
	s := &Store{client: client, bucket: bucket}
	for _, fn := range optFns {
		if fn != nil {
			fn(&s.opts)
		}
	}
	switch {
	case s.opts.PartSize == 0:
		s.opts.PartSize = DefaultPartSize
	case s.opts.PartSize < minPartSize:
		return nil, &sqsapi.InvalidInputError{Op: "s3payload.New", Param: "PartSize", Reason: fmt.Sprintf("%d is under S3's smallest part, 5 MiB", s.opts.PartSize)}
	}
	return s, nil
}

// validBucket reports whether name is a bucket name S3 takes: 3 to 63
// lowercase letters, digits, dots and hyphens, starting and ending with
// a letter or digit.
func validBucket(name string) bool {
	if len(name) < 3 || len(name) > 63 {
		return false
	}
	for i, c := range []byte(name) {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '.' && c != '-' || i == 0 || i == len(name)-1) {
			return false
		}
	}
	return true
}

// Bucket returns the bucket Put writes to.
func (s *Store) Bucket() string { return s.bucket }

// Put implements sqsapi.PayloadStore: it puts body in the Store's bucket
// under key.
func (s *Store) Put(ctx context.Context, key string, body []byte) (string, error) {
	var err error
	if len(body) > s.opts.PartSize {
		err = s.putParts(ctx, key, body)
	} else {
		_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(s.bucket), Key: aws.String(key), ContentType: aws.String(contentType),
			Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
		})
	}
	if err != nil {
		return "", fmt.Errorf("s3payload: putting s3://%s/%s: %w", s.bucket, key, err)
	}
	return s.bucket, nil
}

// contentType is the type of every object: a message body is text.
const contentType = "text/plain; charset=utf-8"

// putParts uploads body in parts of Options.PartSize, partsInFlight at a
// time, and aborts the upload if one fails.
func (s *Store) putParts(ctx context.Context, key string, body []byte) error {
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), ContentType: aws.String(contentType),
	})
	if err != nil {
		return err
	}
	n := (len(body) + s.opts.PartSize - 1) / s.opts.PartSize
	parts := make([]types.CompletedPart, n)
	errs := make([]error, n)
	sem := make(chan struct{}, partsInFlight)
	var wg sync.WaitGroup
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range n {
		part := body[i*s.opts.PartSize : min((i+1)*s.opts.PartSize, len(body))]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out, err := s.client.UploadPart(pctx, &s3.UploadPartInput{
				Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: up.UploadId,
				PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(part), ContentLength: aws.Int64(int64(len(part))),
			})
			if err != nil {
				errs[i] = err
				cancel()
				return
			}
			// The ETag without its quotes, which S3 takes either way:
			// Go's XML encoder writes a quote as &#34;, which fauxqs's
			// parser does not read back.
			etag := strings.Trim(aws.ToString(out.ETag), `"`)
			parts[i] = types.CompletedPart{ETag: aws.String(etag), PartNumber: aws.Int32(int32(i + 1))}
		}()
	}
	wg.Wait()
	err = errors.Join(errs...)
	if err == nil {
		_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
	}
	if err != nil {
		// Its parts would be billed until the bucket's lifecycle rule
		// aborts the upload.
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer acancel()
		_, _ = s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: up.UploadId})
	}
	return err
}

// Get implements sqsapi.PayloadStore: it reads the object key of bucket
// (the Store's, or an extended-client sender's). A missing object is an
// error matching sqsapi.ErrPayloadNotFound.
func (s *Store) Get(ctx context.Context, bucket, key string) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("s3payload: getting s3://%s/%s: %w (%w)", bucket, key, sqsapi.ErrPayloadNotFound, err)
		}
		return nil, fmt.Errorf("s3payload: getting s3://%s/%s: %w", bucket, key, err)
	}
	defer func() { _ = out.Body.Close() }()
	n := aws.ToInt64(out.ContentLength)
	if n > MaxObjectSize {
		return nil, fmt.Errorf("s3payload: s3://%s/%s has %d bytes, more than %d", bucket, key, n, MaxObjectSize)
	}
	buf := bytes.NewBuffer(make([]byte, 0, max(n, 0)+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(out.Body, MaxObjectSize+1)); err != nil {
		return nil, fmt.Errorf("s3payload: reading s3://%s/%s: %w", bucket, key, err)
	}
	if buf.Len() > MaxObjectSize {
		return nil, fmt.Errorf("s3payload: s3://%s/%s has more than %d bytes", bucket, key, MaxObjectSize)
	}
	return buf.Bytes(), nil
}

// Delete implements sqsapi.PayloadStore: it deletes the object key of
// bucket; one that is gone already is no error.
func (s *Store) Delete(ctx context.Context, bucket, key string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil && !notFound(err) {
		return fmt.Errorf("s3payload: deleting s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}

// notFound reports whether err says the object does not exist.
func notFound(err error) bool {
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return true
	}
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound")
}
