package protocol

import (
	"net/http"
	"net/http/httptest"
)

// Transport hands requests straight to a server's handler, with no
// socket, HTTP parsing or kernel round trip in between: the SDK still
// serializes and signs every request and parses every response, so the wire
// format is exercised in full, but a call costs a fraction of a TCP one.
// Request cancellation reaches the handler through the request's context,
// as it does over TCP.
type Transport struct{ Handler http.Handler }

// RoundTrip serves r with the handler and returns its recorded response.
func (t Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.Handler.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}
