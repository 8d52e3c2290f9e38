package acl

import (
	"errors"
	"fmt"
	"strings"
)

// Pattern is what a grant covers: one topic name, or every topic whose name starts with
// a prefix ("" for every topic).
type Pattern struct {
	Name   string // the topic name, or the prefix
	Prefix bool
}

// maxTopicLen is the longest topic name (the wire format's limit).
const maxTopicLen = 249

// ParsePattern parses a topic name ("orders") or a prefix followed by * ("orders.*",
// and "*" for every topic).
func ParsePattern(s string) (Pattern, error) {
	name, prefix := strings.CutSuffix(s, "*")
	if err := checkName(name, prefix); err != nil {
		return Pattern{}, fmt.Errorf("topic pattern %q: %w", s, err)
	}
	return Pattern{Name: name, Prefix: prefix}, nil
}

// checkName refuses what no topic name is made of: * but at the end, blanks, and names
// (not prefixes) that are empty or too long. The broker checks names fully; a pattern
// only has to be unambiguous in the file.
func checkName(name string, prefix bool) error {
	switch {
	case !prefix && name == "":
		return errors.New("empty topic name")
	case len(name) > maxTopicLen:
		return fmt.Errorf("longer than %d bytes", maxTopicLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !topicChar(c) {
			return fmt.Errorf("byte %d is not one of [a-zA-Z0-9._-] (a prefix ends with a single *)", i)
		}
	}
	return nil
}

func topicChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// String returns the pattern as the file writes it.
func (p Pattern) String() string {
	if p.Prefix {
		return p.Name + "*"
	}
	return p.Name
}

// Matches reports whether the pattern covers topic.
func (p Pattern) Matches(topic []byte) bool {
	if p.Prefix {
		return len(topic) >= len(p.Name) && string(topic[:len(p.Name)]) == p.Name
	}
	return string(topic) == p.Name
}
