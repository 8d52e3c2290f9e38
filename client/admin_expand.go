package client

import (
	"context"
	"fmt"

	"sluice/wire"
)

// ExpandTopic raises a topic's physical partition count to partitions (distributed mode):
// the logical ranges are split again over the new count and the topic's version goes up
// by one; producers and consumers follow without losing or reordering the records of a
// logical partition (docs/cluster.md, "Expansion"). It returns the new metadata, whose new
// partitions have no address until the admin places them. Errors: wire.CodeInvalidConfig
// (not more partitions than the topic has, more than 65536, an embedded broker),
// wire.CodeUnknownTopic, wire.CodeTopicChanged (another expansion won, or the last one has
// not finished switching); see IsCode.
func (a *Admin) ExpandTopic(ctx context.Context, name string, partitions int) (wire.Topic, error) {
	var t wire.Topic
	err := a.call(ctx, &wire.ExpandTopicRequest{Name: name, Partitions: uint32(partitions)}, false, func(r *wire.Response) error {
		if err := r.Err(); err != nil {
			return err
		}
		t = r.Body.(*wire.ExpandTopicResponse).Topic
		return nil
	})
	if err != nil {
		return t, fmt.Errorf("cannot expand topic %s to %d partitions: %w", name, partitions, err)
	}
	return t, nil
}

// TopicLayouts returns a topic's partition layouts, oldest first, with the offsets at
// which each old partition switched to the next layout (-1 while it has not).
func (a *Admin) TopicLayouts(ctx context.Context, name string) ([]wire.Layout, error) {
	var ls []wire.Layout
	err := a.call(ctx, &wire.TopicLayoutsRequest{Name: name}, true, func(r *wire.Response) error {
		if err := r.Err(); err != nil {
			return err
		}
		ls = r.Body.(*wire.TopicLayoutsResponse).Layouts
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot get the layouts of topic %s: %w", name, err)
	}
	return ls, nil
}
