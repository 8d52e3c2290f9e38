package wire

import "testing"

// TestLayoutsDecodeRefuses: layouts that do not rise, switch offsets that do not match
// the previous layout's partitions, and offsets below -1 are malformed; an expansion to
// fewer than 2 or more than 65536 partitions is invalid_config.
func TestLayoutsDecodeRefuses(t *testing.T) {
	f := func(name string, ls []Layout, want Code) {
		t.Helper()
		body := (&TopicLayoutsResponse{Name: "t", Layouts: ls}).AppendTo(nil)
		var r TopicLayoutsResponse
		_, err := r.Decode(body)
		if want == CodeNone {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return
		}
		requireCode(t, err, want)
	}
	f("ok", []Layout{{1, 2, nil}, {2, 4, []int64{5, -1}}}, CodeNone)
	f("none", nil, CodeMalformed)
	f("switches in the first", []Layout{{1, 2, []int64{0}}}, CodeMalformed)
	f("zero partitions", []Layout{{1, 0, nil}}, CodeMalformed)
	f("too many partitions", []Layout{{1, MaxPartitions + 1, nil}}, CodeMalformed)
	f("same version", []Layout{{1, 2, nil}, {1, 4, []int64{0, 0}}}, CodeMalformed)
	f("fewer partitions", []Layout{{1, 4, nil}, {2, 2, []int64{0, 0, 0, 0}}}, CodeMalformed)
	f("switches short", []Layout{{1, 2, nil}, {2, 4, []int64{0}}}, CodeMalformed)
	f("switch below -1", []Layout{{1, 2, nil}, {2, 4, []int64{0, -2}}}, CodeMalformed)
	for _, n := range []uint32{0, 1, MaxPartitions + 1} {
		var r ExpandTopicRequest
		_, err := r.Decode((&ExpandTopicRequest{Name: "t", Partitions: n}).AppendTo(nil))
		requireCode(t, err, CodeInvalidConfig)
	}
}
