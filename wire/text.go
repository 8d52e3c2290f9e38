package wire

// TextOf returns the error text a broker answers for err: the message of a
// *ProtocolError in err's chain (its code travels in the frame header, so the text does
// not repeat it), else err's whole text.
func TextOf(err error) string { return textOf(err) }
