package statement

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// An entry inflating past its bound is refused at the bound: the reader hands over
// exactly max bytes, then fails, without reading the rest.
func TestCapReaderStopsAtTheBound(t *testing.T) {
	const bound = 1 << 20
	src := bytes.NewReader(make([]byte, 3*bound))
	c := &capReader{r: io.LimitReader(src, bound+1), max: bound, name: "x_业务明细.csv"}
	n, err := io.Copy(io.Discard, c)
	if n != bound || !errors.Is(err, ErrMalformedBill) {
		t.Fatalf("read %d bytes, %v; want %d and a malformed bill", n, err, bound)
	}
	if left := src.Len(); left < 2*bound-1 {
		t.Fatalf("%d bytes of the source left, want the 2 MiB past the bound unread", left)
	}

	c = &capReader{r: io.LimitReader(bytes.NewReader(make([]byte, bound)), bound+1), max: bound}
	if n, err := io.Copy(io.Discard, c); n != bound || err != nil {
		t.Fatalf("an entry of exactly the bound: %d bytes, %v", n, err)
	}
}
