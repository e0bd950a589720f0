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
	const max = 1 << 20
	src := bytes.NewReader(make([]byte, 3*max))
	c := &capReader{r: io.LimitReader(src, max+1), max: max, name: "x_业务明细.csv"}
	n, err := io.Copy(io.Discard, c)
	if n != max || !errors.Is(err, ErrMalformedBill) {
		t.Fatalf("read %d bytes, %v; want %d and a malformed bill", n, err, max)
	}
	if left := src.Len(); left < 2*max-1 {
		t.Fatalf("%d bytes of the source left, want the 2 MiB past the bound unread", left)
	}

	c = &capReader{r: io.LimitReader(bytes.NewReader(make([]byte, max)), max+1), max: max}
	if n, err := io.Copy(io.Discard, c); n != max || err != nil {
		t.Fatalf("an entry of exactly the bound: %d bytes, %v", n, err)
	}
}
