package main

import (
	"flag"
	"fmt"
	"io"

	"sluice/admin"
	"sluice/auth"
	"sluice/auth/acl"
)

// The acl commands edit the ACL file a broker with auth.users reads (auth.acls; reloaded
// on a change or SIGHUP), or with --zk the ACL znode brokers with auth.source zk follow: `sluice acl add --user U --topic T|--prefix P --ops OPS`,
// `sluice acl remove` (the same flags; --ops optional: all of them), `sluice acl list`.

// defaultACLFile is where the commands look without --file (the deploy/ layout).
const defaultACLFile = "/etc/sluice/acls"

// grantFlags are the flags naming a grant.
type grantFlags struct {
	store                    authStore
	user, topic, prefix, ops *string
}

func newGrantFlags(fs *flag.FlagSet) grantFlags {
	return grantFlags{
		store:  aclStore(fs),
		user:   fs.String("user", "", "the user, or * for every authenticated user (required)"),
		topic:  fs.String("topic", "", "one topic"),
		prefix: fs.String("prefix", "", "every topic whose name starts with this"),
		ops:    fs.String("ops", "", "operations, comma-separated: produce, consume, create, describe, admin"),
	}
}

// parse returns the grant's user, operations (0 when --ops is not given) and pattern.
func (g grantFlags) parse(fs *flag.FlagSet, args []string, all *bool) (string, acl.Op, acl.Pattern, error) {
	if err := noPositional(fs, args); err != nil {
		return "", 0, acl.Pattern{}, err
	}
	if err := g.store.check(); err != nil {
		return "", 0, acl.Pattern{}, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *g.user == "" || btoi(set["topic"])+btoi(set["prefix"])+btoi(*all) != 1 {
		return "", 0, acl.Pattern{}, usageError{"want --user and one of --topic, --prefix or --all"}
	}
	if err := acl.CheckUser(*g.user); err != nil {
		return "", 0, acl.Pattern{}, usageError{err.Error()}
	}
	if set["prefix"] && *g.prefix == "" { // "*": every topic, which only --all may say
		return "", 0, acl.Pattern{}, usageError{"--prefix is empty: give --all for every topic"}
	}
	pattern := *g.topic
	if !set["topic"] {
		pattern = *g.prefix + "*"
	}
	p, err := acl.ParsePattern(pattern)
	if err != nil {
		return "", 0, acl.Pattern{}, usageError{err.Error()}
	}
	var ops acl.Op
	if *g.ops != "" {
		if ops, err = acl.ParseOps(*g.ops); err != nil {
			return "", 0, acl.Pattern{}, usageError{"--ops: " + err.Error()}
		}
	}
	return *g.user, ops, p, nil
}

// aclStore defines --file, --zk and --zk-root.
func aclStore(fs *flag.FlagSet) authStore {
	file := fs.String("file", defaultACLFile, "the ACL file (the broker's auth.acls)")
	return newAuthStore(fs, file, admin.ACLsZnode)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func aclAdd(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("acl add", flag.ContinueOnError)
	g := newGrantFlags(fs)
	all := fs.Bool("all", false, "every topic (the pattern *)")
	user, ops, p, err := g.parse(fs, args, all)
	if err != nil {
		return err
	}
	if ops == 0 {
		return usageError{"--ops is required"}
	}
	e, err := auth.AddGrantEdit(user, ops, p)
	if err != nil {
		return err
	}
	if _, err := g.store.edit(e); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "allow %s %s %s\n", user, ops, p)
	return nil
}

func aclRemove(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("acl remove", flag.ContinueOnError)
	g := newGrantFlags(fs)
	all := fs.Bool("all", false, "the grant on every topic (the pattern *)")
	user, ops, p, err := g.parse(fs, args, all)
	if err != nil {
		return err
	}
	if _, err := g.store.edit(auth.RemoveGrantEdit(user, ops, p)); err != nil {
		return err
	}
	what := "every operation"
	if ops != 0 {
		what = ops.String()
	}
	fmt.Fprintf(stdout, "removed %s of %s on %s\n", what, user, p)
	return nil
}

func aclList(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("acl list", flag.ContinueOnError)
	store := aclStore(fs)
	user := fs.String("user", "", "only this user's grants (and those of *)")
	if err := noPositional(fs, args); err != nil {
		return err
	}
	if err := store.check(); err != nil {
		return err
	}
	rules, err := store.rules()
	if err != nil {
		return err
	}
	for _, r := range rules {
		if *user == "" || r.User == *user || r.User == acl.AnyUser {
			fmt.Fprintf(stdout, "allow %s %s %s\n", r.User, r.Ops, r.Topic)
		}
	}
	return nil
}
