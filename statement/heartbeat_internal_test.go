package statement

import (
	"bytes"
	"io"
	"testing"
)

// A long download heartbeats while it reads, throttled to one beat per heartbeatEvery.
func TestBeatingReaderBeatsThrottled(t *testing.T) {
	beats := 0
	beat := everyFewSeconds(func() { beats++ })
	r := beatingReader{r: bytes.NewReader(make([]byte, 1<<20)), beat: beat}
	buf := make([]byte, 1024)
	for {
		if _, err := r.Read(buf); err == io.EOF {
			break
		}
	}
	if beats != 1 {
		t.Fatalf("%d beats within one heartbeat interval, want 1", beats)
	}
}
