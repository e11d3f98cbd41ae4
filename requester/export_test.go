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
