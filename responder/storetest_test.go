package responder_test

import (
	"testing"

	"github.com/tempqueues/tempqueues/responder"
	"github.com/tempqueues/tempqueues/responder/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) responder.Store { return responder.NewMemoryStore() })
}
