// Package s3payload is an sqsapi.PayloadStore on Amazon S3: with it, a
// requester and a responder (requester.Options.PayloadStore,
// responder.Options.PayloadStore) send bodies too large for one SQS
// message, up to 64 MiB, through a bucket, in the format of AWS's SQS
// Extended Client Libraries for Java and Python, which read tempqueues'
// pointers as tempqueues reads theirs (docs/wire.md, "Payloads in S3").
//
// It lives in its own module, github.com/tempqueues/tempqueues/s3payload,
// so that only programs that use it depend on the S3 client
// (github.com/aws/aws-sdk-go-v2/service/s3).
//
// # Objects
//
// Keys are tempqueues/<deadline>/<uuid>, the deadline the Unix time in
// seconds at which the message's reader gives up (0 when it has none).
// The object is deleted when its message is done with: a request's once
// the responder has sent the reply and deleted the request, a reply's
// once the requester has read it. A process that crashes in between
// leaves its object: a lifecycle rule on the prefix tempqueues/ that
// expires objects after one day removes it (docs/s3.md). Reading a
// pointer from an extended client uses the bucket the pointer names,
// which the credentials must be allowed to read.
//
// # Permissions
//
// s3:PutObject, s3:GetObject and s3:DeleteObject on
// arn:aws:s3:::BUCKET/tempqueues/* (and on the objects of the buckets
// extended-client senders use, to read theirs).
package s3payload
