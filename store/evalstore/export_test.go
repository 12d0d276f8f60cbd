package evalstore

// RequestCount exposes requestCount to the package's external tests.
func (tx *Tx) RequestCount() (int, error) { return tx.requestCount() }
