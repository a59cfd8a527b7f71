package jsonstrict

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// PlainBytes returns the index of the first byte at or after i in b that
// is a quote, a backslash or a control character — where a scan through
// a JSON string must look — or len(b). Eight bytes are tested at a time;
// past 128 plain bytes the run is a long string (a prompt, a document),
// searched a window at a time by plainRun.
func PlainBytes(b []byte, i int) int {
	for n := 0; i+8 <= len(b); n++ {
		if m := special8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		if i += 8; n == 15 {
			return plainRun(b, i)
		}
	}
	for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
		i++
	}
	return i
}

// runWindow bounds each search of plainRun: its windows start at 64
// bytes and double up to runWindow, so that a string with an escape every
// so often is not searched far past each one, and a long plain one is
// searched in few calls.
const runWindow = 4096

// plainRun is PlainBytes through a long run: in each window the quote and
// the backslash are found with bytes.IndexByte (vectorised), and only the
// bytes before them are tested for control characters, 32 at a time.
func plainRun(b []byte, i int) int {
	for size := 64; len(b)-i >= 32; size = min(2*size, runWindow) {
		full := min(size, len(b)-i)
		w := b[i : i+full]
		if k := bytes.IndexByte(w, '"'); k >= 0 {
			w = w[:k]
		}
		if k := bytes.IndexByte(w, '\\'); k >= 0 {
			w = w[:k]
		}
		if n := controlFree(w); n < full {
			return i + n
		}
		i += full
	}
	for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
		i++
	}
	return i
}

// controlFree returns the index of the first control character in w, or
// len(w).
func controlFree(w []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	j := 0
	for ; j+32 <= len(w); j += 32 {
		v := w[j : j+32]
		x0, x1 := binary.LittleEndian.Uint64(v), binary.LittleEndian.Uint64(v[8:])
		x2, x3 := binary.LittleEndian.Uint64(v[16:]), binary.LittleEndian.Uint64(v[24:])
		// A byte below 0x20 borrows into its high bit (a byte of 0x80 or
		// more has its own, masked out): exact for whether any is.
		if ((x0-ones*0x20)&^x0|(x1-ones*0x20)&^x1|(x2-ones*0x20)&^x2|(x3-ones*0x20)&^x3)&highs != 0 {
			break
		}
	}
	for j < len(w) && w[j] >= 0x20 {
		j++
	}
	return j
}

// special8 marks, with its high bit, each of the eight bytes in x (read
// little-endian) that may be a quote, a backslash or a control character.
// The lowest mark is exact: a subtraction borrows out of a byte only where
// that byte is marked rightly, so a false mark can only follow a true one.
func special8(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, b := x^(ones*'"'), x^(ones*'\\')
	return ((x-ones*0x20)&^x | (q-ones)&^q | (b-ones)&^b) & highs
}

// Hex4 is the value of the four hex digits of a \u escape at b[at:].
func Hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// NumberEnd reads the JSON number (RFC 8259's grammar) at b[i:] and
// returns where it ends; false when there is none.
func NumberEnd(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
