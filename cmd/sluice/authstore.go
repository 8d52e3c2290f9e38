package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"sluice/admin"
	"sluice/auth"
	"sluice/auth/acl"
)

// authStore is where `sluice user` and `sluice acl` read and write: a file (--file, what
// a broker with auth.users reads), or with --zk the cluster's znode (what brokers with
// auth.source = zk follow). Edits of a znode are conditional on the version read and
// made again on a conflict (admin.Cluster.EditSecurity): two operators editing at once
// both land.
type authStore struct {
	fs    *flag.FlagSet
	file  *string
	zk    zkFlags
	znode string // admin.UsersZnode or admin.ACLsZnode
}

// zkTimeout bounds how long the commands wait for a ZooKeeper session, and its timeout.
const zkTimeout = 10 * time.Second

func newAuthStore(fs *flag.FlagSet, file *string, znode string) authStore {
	return authStore{fs: fs, file: file, znode: znode, zk: zkFlags{
		addrs: fs.String("zk", "", "edit the cluster's znode in these ZooKeeper addresses, comma-separated, instead of --file (brokers with auth.source zk follow it)"),
		root:  fs.String("zk-root", "/sluice", "with --zk: root of the cluster's znodes"),
		auth:  zkAuthFlag(fs),
	}}
}

// check refuses --file with --zk; call it once the flags are parsed.
func (s authStore) check() error {
	if *s.zk.addrs == "" {
		return nil
	}
	set := false
	s.fs.Visit(func(f *flag.Flag) { set = set || f.Name == "file" })
	if set {
		return usageError{"--file and --zk exclude each other"}
	}
	return nil
}

// onZK reports whether the commands work on ZooKeeper.
func (s authStore) onZK() bool { return *s.zk.addrs != "" }

// edit applies e to the file or the znode, and returns where it wrote.
func (s authStore) edit(e auth.Edit) (string, error) {
	if !s.onZK() {
		return *s.file, auth.EditFile(*s.file, e)
	}
	c, err := s.zk.dial(context.Background(), zkTimeout, zkTimeout, nil)
	if err != nil {
		return "", err
	}
	defer c.Close()
	where := c.SecurityPath(s.znode)
	if err := c.EditSecurity(s.znode, e); err != nil {
		return "", fmt.Errorf("%s: %w", where, err)
	}
	return where, nil
}

// readZK returns the znode's content (nil when it is missing) and its path.
func (s authStore) readZK() ([]byte, string, error) {
	c, err := s.zk.dial(context.Background(), zkTimeout, zkTimeout, nil)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	data, _, _, _, err := c.ReadSecurity(s.znode)
	return data, c.SecurityPath(s.znode), err
}

// users reads the users of the file or the znode, for listing.
func (s authStore) users() (*auth.Users, error) {
	if !s.onZK() {
		return auth.ReadUsers(*s.file)
	}
	data, where, err := s.readZK()
	if err != nil {
		return nil, err
	}
	if data == nil {
		return nil, fmt.Errorf("%s: no users (the znode does not exist)", where)
	}
	u, err := auth.ParseUsers(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return u, nil
}

// rules reads the grants of the file or the znode (none when it is missing).
func (s authStore) rules() ([]acl.Rule, error) {
	if !s.onZK() {
		return auth.LoadRules(*s.file)
	}
	data, where, err := s.readZK()
	if err != nil {
		return nil, err
	}
	rules, err := acl.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return rules, nil
}

// importTo replaces the znode's content with content (already parsed by the caller):
// how a cluster moves from files to ZooKeeper, and how content that no longer parses is
// written over. It needs --zk.
func (s authStore) importTo(content []byte) (string, error) {
	if !s.onZK() {
		return "", usageError{"import needs --zk: it copies a file into the cluster's znode"}
	}
	return s.edit(func([]byte, bool) ([]byte, error) { return content, nil })
}

// userImport copies a users file into the users znode.
func userImport(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("user import", flag.ContinueOnError)
	store := newAuthStore(fs, new(string), admin.UsersZnode)
	path, err := parseOneArg(fs, args, "users file")
	if err != nil {
		return err
	}
	u, err := auth.ReadUsers(path)
	if err != nil {
		return err
	}
	where, err := store.importTo(u.Format())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d users of %s written to %s\n", len(u.Names()), path, where)
	return nil
}

// aclImport copies an ACL file into the ACL znode.
func aclImport(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("acl import", flag.ContinueOnError)
	store := newAuthStore(fs, new(string), admin.ACLsZnode)
	path, err := parseOneArg(fs, args, "ACL file")
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read the ACL file: %w", err)
	}
	rules, err := acl.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	where, err := store.importTo(acl.Format(rules))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d grants of %s written to %s\n", len(rules), path, where)
	return nil
}
