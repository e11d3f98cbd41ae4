package requester

// Expecting returns the number of replies r's current host queue expects:
// the calls registered on it with Host.Expect.
func Expecting(r *Requester) int {
	h := r.host.Load()
	if h == nil {
		return 0
	}
	return h.Expecting()
}

// Replied returns the replies r handed to its callers: calls' responses
// and every message of their streams, end marks included.
func Replied(r *Requester) int64 { return r.replied.Load() }

// Held returns the bytes of a reply's parts c holds while it joins them.
func Held(c *Call) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.join == nil {
		return 0
	}
	return c.join.Held()
}
