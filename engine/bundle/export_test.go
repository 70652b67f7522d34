package bundle

// SetDataFileBytes makes Build split data at n bytes until the returned
// function restores the limit.
func SetDataFileBytes(n int) (restore func()) {
	old := dataFileBytes
	dataFileBytes = n
	return func() { dataFileBytes = old }
}
