package worker

import (
	"strings"
	"testing"
)

// FuzzDecodeSlotCheckpoint: a slot checkpoint read from the lease table may be anything (an older
// version, a hand edit, a truncated write). Decoding never panics, rejects what it cannot read, and
// whatever it accepts encodes back to the same checkpoint.
func FuzzDecodeSlotCheckpoint(f *testing.F) {
	f.Add("")
	f.Add(slotCheckpoint{pass: 3, dirty: true, scan: `{"v":1,"t":"x","n":1,"c":[{"s":0,"d":true}]}`}.encode())
	f.Add(slotCheckpoint{pass: 0, scan: ""}.encode())
	f.Add("dp1|0|0|")
	f.Add("dp1|-1|0|x")
	f.Add("dp1|1|2|x")
	f.Add("dp1|99999999999999999999|1|x")
	f.Add("dp1|+7|1|a|b|c")
	f.Add("dp2|1|1|x")
	f.Add("dp1|1")
	f.Add("\xff\x00|\n")
	f.Fuzz(func(t *testing.T, v string) {
		cp, err := decodeSlotCheckpoint(v)
		if err != nil {
			if cp != (slotCheckpoint{}) {
				t.Fatalf("decode %q failed (%v) but returned %+v", v, err, cp)
			}
			return
		}
		if cp.pass < 0 {
			t.Fatalf("decode %q: negative pass %d", v, cp.pass)
		}
		if v == "" {
			if cp != (slotCheckpoint{}) {
				t.Fatalf("empty checkpoint decoded to %+v", cp)
			}
			return
		}
		enc := cp.encode()
		back, err := decodeSlotCheckpoint(enc)
		if err != nil {
			t.Fatalf("re-decode %q (from %q): %v", enc, v, err)
		}
		if back != cp {
			t.Fatalf("round trip %q: %+v != %+v", v, back, cp)
		}
		if !strings.HasPrefix(enc, checkpointPrefix+"|") || !strings.HasSuffix(enc, cp.scan) {
			t.Fatalf("encode %+v = %q", cp, enc)
		}
	})
}
