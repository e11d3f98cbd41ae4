// Package api is the vocabulary sqstest's layers share: the request and
// response shapes of the SQS API (those of the AWS JSON 1.0 protocol, into
// which the query protocol decodes too) and Error, an error answer with the
// HTTP status and codes both protocols send. The server's operations take
// and return these shapes; package protocol reads and writes them on the
// wire; package journal stores message attributes as AttrValue. It imports
// nothing of the module.
package api
