package iocount

import "io"

// Writer passes every write to W and counts the bytes W took in N. With
// W nil it takes every byte and keeps none (io.Discard), so N is the size
// of what was written.
type Writer struct {
	W io.Writer
	N int64
}

// Write writes p to W and adds what W took to N.
func (c *Writer) Write(p []byte) (int, error) {
	if c.W == nil {
		c.N += int64(len(p))
		return len(p), nil
	}
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}
