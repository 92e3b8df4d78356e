package redact

import "bytes"

// Each value has a dozen forms or more (spellings), and a server may hold
// tens of Secret variables: searching the text once per form (bytes.Index)
// made redacting a 1 MiB stderr four to five times slower once the
// encodings were added. prefixIndex finds every form in one pass instead:
// every form is at least MinLen bytes long, so its first MinLen bytes are a
// key, and a position of the text is looked at further only when the key
// there passes a bitmap filter and names forms in a map. The cost per byte
// does not grow with the number of forms.

// filterBits is the size of the bitmap, in bits (32 KiB): with a few
// hundred keys, few positions pass it by chance.
const (
	filterLog  = 18
	filterBits = 1 << filterLog
)

type prefixIndex struct {
	filter [filterBits / 64]uint64
	// byKey are the indices in forms of the forms with that key, longest
	// first (forms is sorted so).
	byKey map[uint64][]int
}

func newPrefixIndex(forms []form) *prefixIndex {
	x := &prefixIndex{byKey: map[uint64][]int{}}
	for i, f := range forms {
		k := prefixKey(f.text)
		h := filterHash(k)
		x.filter[h/64] |= 1 << (h % 64)
		x.byKey[k] = append(x.byKey[k], i)
	}
	return x
}

// prefixKey packs the first MinLen bytes of b (len(b) >= MinLen).
func prefixKey(b []byte) uint64 {
	_ = b[MinLen-1]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32 | uint64(b[5])<<40
}

// filterHash spreads a key over the bitmap (Fibonacci hashing).
func filterHash(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> (64 - filterLog) }

// find is the first position at or after from, and before limit, where a
// form lies wholly in buf, and the longest form there: leftmost-longest, so
// a value containing another is replaced whole. -1 when there is none.
func (x *prefixIndex) find(forms []form, buf []byte, from, limit int) (at, f int) {
	end := min(limit, len(buf)-MinLen+1)
	for i := from; i < end; i++ {
		k := prefixKey(buf[i:])
		if h := filterHash(k); x.filter[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		for _, j := range x.byKey[k] {
			if bytes.HasPrefix(buf[i:], forms[j].text) {
				return i, j
			}
		}
	}
	return -1, -1
}
