package acl

import (
	"bytes"
	"fmt"
	"strings"

	"sluice/internal/lines"
)

// fileHeader starts every file Format writes.
const fileHeader = "# sluice ACLs: allow USER OPS TOPIC (OPS: produce,consume,create,describe,admin;\n" +
	"# TOPIC: a name, or a prefix followed by *). Written by sluice acl add/remove.\n"

// Parse reads the rules of an ACL file, in file order. An error names the line.
func Parse(data []byte) ([]Rule, error) {
	var rules []Rule
	err := lines.Each(data, func(line string) error {
		r, err := parseLine(line)
		rules = append(rules, r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cannot parse ACLs: %w", err)
	}
	return rules, nil
}

func parseLine(line string) (Rule, error) {
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "allow" {
		return Rule{}, fmt.Errorf("want `allow USER OPS TOPIC`, got %d fields starting %q", len(f), f[0])
	}
	if err := CheckUser(f[1]); err != nil {
		return Rule{}, err
	}
	ops, err := ParseOps(f[2])
	if err != nil {
		return Rule{}, err
	}
	p, err := ParsePattern(f[3])
	if err != nil {
		return Rule{}, err
	}
	return Rule{User: f[1], Ops: ops, Topic: p}, nil
}

// CheckUser refuses a rule's user that no user name can be: empty, or holding a blank,
// a control byte or '#'. (User names are checked fully where users are made.)
func CheckUser(user string) error {
	if user == "" {
		return fmt.Errorf("empty user name")
	}
	for i := 0; i < len(user); i++ {
		if c := user[i]; c <= ' ' || c == 0x7f || c == '#' {
			return fmt.Errorf("user name byte %d is a blank, a control byte or #", i)
		}
	}
	return nil
}

// Format writes rules as an ACL file, one line a rule, in order.
func Format(rules []Rule) []byte {
	var b bytes.Buffer
	b.WriteString(fileHeader)
	for _, r := range rules {
		fmt.Fprintf(&b, "allow %s %s %s\n", r.User, r.Ops, r.Topic)
	}
	return b.Bytes()
}

// Add returns rules with ops granted to user on p: added to the rule for the same user
// and pattern when there is one, else appended.
func Add(rules []Rule, user string, ops Op, p Pattern) []Rule {
	for i := range rules {
		if rules[i].User == user && rules[i].Topic == p {
			rules[i].Ops |= ops
			return rules
		}
	}
	return append(rules, Rule{User: user, Ops: ops, Topic: p})
}

// Remove returns rules without ops for user on p (every operation when ops is 0); a
// rule left with none is dropped. removed reports whether anything was taken away.
func Remove(rules []Rule, user string, ops Op, p Pattern) (out []Rule, removed bool) {
	if ops == 0 {
		ops = allOps
	}
	out = rules[:0]
	for _, r := range rules {
		if r.User == user && r.Topic == p && r.Ops&ops != 0 {
			r.Ops &^= ops
			removed = true
		}
		if r.Ops != 0 {
			out = append(out, r)
		}
	}
	return out, removed
}
