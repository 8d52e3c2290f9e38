package acl

import "sort"

// AnyUser in a rule's User field grants to every authenticated user.
const AnyUser = "*"

// Rule grants a user operations on the topics a pattern covers.
type Rule struct {
	User  string // a user name, or AnyUser
	Ops   Op
	Topic Pattern
}

// Set is the rules compiled for evaluation, by user. It is immutable and safe for
// concurrent use.
type Set struct {
	byUser map[string]*Grants
	anyone *Grants // AnyUser's rules alone, for users without rules of their own
}

// Grants are one user's compiled rules (with AnyUser's): what Allows evaluates. A nil
// *Grants allows nothing. Immutable and safe for concurrent use.
type Grants struct {
	exact    map[string]Op // topic name -> operations, implications applied
	prefixes []prefixGrant // longest prefix first
}

type prefixGrant struct {
	prefix string
	ops    Op // implications applied
}

// NewSet compiles rules. Rules for the same user and pattern add up.
func NewSet(rules []Rule) *Set {
	s := &Set{byUser: map[string]*Grants{}}
	var anyRules []Rule
	for _, r := range rules {
		if r.User == AnyUser {
			anyRules = append(anyRules, r)
		}
	}
	s.anyone = compile(anyRules)
	mine := map[string][]Rule{}
	for _, r := range rules {
		if r.User != AnyUser {
			mine[r.User] = append(mine[r.User], r)
		}
	}
	for user, rs := range mine {
		s.byUser[user] = compile(append(rs, anyRules...))
	}
	return s
}

// compile builds the Grants of rules; nil when there are none.
func compile(rules []Rule) *Grants {
	if len(rules) == 0 {
		return nil
	}
	g := &Grants{exact: map[string]Op{}}
	byPrefix := map[string]Op{}
	for _, r := range rules {
		if r.Topic.Prefix {
			byPrefix[r.Topic.Name] |= r.Ops
		} else {
			g.exact[r.Topic.Name] |= r.Ops
		}
	}
	for name, ops := range g.exact {
		g.exact[name] = ops.implied()
	}
	for p, ops := range byPrefix {
		g.prefixes = append(g.prefixes, prefixGrant{p, ops.implied()})
	}
	sort.Slice(g.prefixes, func(i, j int) bool {
		a, b := g.prefixes[i].prefix, g.prefixes[j].prefix
		return len(a) > len(b) || len(a) == len(b) && a < b
	})
	return g
}

// For returns the grants of user: its own rules and AnyUser's. The result may be nil,
// which allows nothing.
func (s *Set) For(user string) *Grants {
	if s == nil {
		return nil
	}
	if g, ok := s.byUser[user]; ok {
		return g
	}
	return s.anyone
}

// Allows reports whether g allows op on topic (a name as a string or as bytes); a nil g
// allows nothing. It allocates nothing: a map lookup and a scan of the user's prefixes.
func Allows[T ~string | ~[]byte](g *Grants, op Op, topic T) bool {
	if g == nil {
		return false
	}
	if g.exact[string(topic)]&op != 0 {
		return true
	}
	for i := range g.prefixes {
		p := &g.prefixes[i]
		if p.ops&op != 0 && len(topic) >= len(p.prefix) && string(topic[:len(p.prefix)]) == p.prefix {
			return true
		}
	}
	return false
}
