package wire

import (
	"strings"
)

// IsVirtualQueueURL reports whether u is a virtual queue URL, that is, has a
// '#' fragment. Such a URL must never reach SQS.
func IsVirtualQueueURL(u string) bool { return strings.IndexByte(u, '#') >= 0 }

// VirtualQueueURL returns the URL of the virtual queue name on hostURL, in the
// Java client's format "<host-url>#<name>".
func VirtualQueueURL(hostURL, name string) string { return hostURL + "#" + name }

// ParseVirtualQueueURL splits a virtual queue URL "<host-url>#<name>" at its
// first '#'. It returns an *sqsapi.InvalidInputError when u is not a well-formed
// virtual queue URL: no '#', an empty or non-absolute host URL, or a name
// that breaks SQS's queue naming rules. A name may end in ".fifo" only on a
// FIFO host, as a real queue's name does only on a FIFO queue.
func ParseVirtualQueueURL(u string) (hostURL, name string, err error) {
	hostURL, name, found := strings.Cut(u, "#")
	switch {
	case !found:
		return "", "", Invalid("", "QueueUrl", "%q is not a virtual queue URL (no '#')", u)
	case !validHostURL(hostURL):
		return "", "", Invalid("", "QueueUrl", "virtual queue URL %q has no valid host queue URL before '#'", u)
	case !ValidQueueName(name) || strings.HasSuffix(name, ".fifo") && !strings.HasSuffix(hostURL, ".fifo"):
		return "", "", Invalid("", "QueueUrl", "virtual queue URL %q: name after '#' must be 1-80 characters of A-Z a-z 0-9 - _ (and may end in .fifo on a FIFO host)", u)
	}
	return hostURL, name, nil
}

// validHostURL reports whether s looks like an absolute queue URL:
// scheme "://" host "/" path, with no white space or control character. It
// runs on every reply a responder sends, so it parses by hand rather than
// with net/url.
func validHostURL(s string) bool {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || scheme == "" {
		return false
	}
	for i := 0; i < len(scheme); i++ {
		c := scheme[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	host, path, ok := strings.Cut(rest, "/")
	return ok && host != "" && path != ""
}

// HostURLOf returns the host queue URL of a virtual queue URL, or u itself
// when it is not virtual.
func HostURLOf(u string) string {
	host, _, _ := strings.Cut(u, "#")
	return host
}
