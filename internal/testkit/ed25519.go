package testkit

// groupOrder is L, the order of Ed25519's prime-order group, little-endian.
var groupOrder = [32]byte{
	0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
}

// AddOrder returns s + L for a little-endian scalar s below L: the same scalar mod L, in the
// 32-byte encoding a verifier must refuse as S.
func AddOrder(s []byte) []byte {
	out := make([]byte, 32)
	var carry uint16
	for i := range out {
		v := uint16(s[i]) + uint16(groupOrder[i]) + carry
		out[i], carry = byte(v), v>>8
	}
	return out
}
