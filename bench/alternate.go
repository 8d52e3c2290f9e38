package bench

// alternate runs n rounds of ours, each beside a round of ceiling: before it in the
// rounds where i%2 == 0 equals ceilingLeads, after it in the others, so that neither side
// always follows the other and each of ours is seconds from a ceiling round. A nil
// ceiling (the suite has no ceiling to run beside) runs only ours. It stops at the first
// error of ours, and returns it.
//
// The two orders of the suite: consume from memory runs ours first (ours, ceiling,
// ceiling, ours, ours, ...), consume from the page cache the ceiling first (ceiling, ours,
// ours, ceiling, ...), since its ceiling's first round writes the ceiling's file.
func alternate(n int, ceilingLeads bool, ours func(i int) error, ceiling func()) error {
	for i := range n {
		before := (i%2 == 0) == ceilingLeads
		if ceiling != nil && before {
			ceiling()
		}
		if err := ours(i); err != nil {
			return err
		}
		if ceiling != nil && !before {
			ceiling()
		}
	}
	return nil
}
