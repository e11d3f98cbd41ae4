package hostq

import (
	"context"
	"errors"
	"sync"
)

// CloseAll closes hosts concurrently and joins their errors.
func CloseAll(ctx context.Context, hosts []*Host) error {
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.Close(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
