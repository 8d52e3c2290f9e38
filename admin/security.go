package admin

import (
	"errors"
	"fmt"
	"path"

	"github.com/go-zookeeper/zk"
)

// Users and ACLs in ZooKeeper (docs/security.md, "Distributed mode"): ROOT/security/users
// and ROOT/security/acls hold a users file's and an ACL file's content, byte for byte
// (package auth parses both). `sluice user` and `sluice acl` with --zk change them
// (EditSecurity: read, change, write conditional on the version read, again on a
// conflict); every broker with auth.source zk follows them (ReadSecurity, StatSecurity).

// The security znodes, under the root.
const (
	UsersZnode = "security/users"
	ACLsZnode  = "security/acls"
)

// maxSecurityData bounds a security znode's content: ZooKeeper refuses (and closes the
// connection of) a request above its jute.maxbuffer, 1 MiB by default. About 6000 users.
const maxSecurityData = 1000 << 10

// maxEditConflicts bounds how often EditSecurity starts again because another editor
// wrote first: each conflict is someone else's edit landing, so this is never reached
// by a few operators.
const maxEditConflicts = 100

// ensureSecurityDir creates ROOT/security, with the security ACL, if it is missing.
func (c *Cluster) ensureSecurityDir() error {
	dir := path.Join(c.root, "security")
	if err := c.ensure(path.Dir(dir)); err != nil {
		return err
	}
	if _, err := c.conn.Create(dir, nil, 0, c.securityACL()); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("cannot create znode %s: %w", dir, err)
	}
	return nil
}

// Stamp tells whether a znode changed: equal stamps, same content. The zero Stamp is a
// missing znode.
type Stamp struct {
	Czxid, Mzxid int64
}

// SecurityPath returns the full path of a security znode (UsersZnode or ACLsZnode).
func (c *Cluster) SecurityPath(name string) string { return path.Join(c.root, name) }

// ReadSecurity reads a security znode (nil and exists false when it is missing) and
// leaves a watch on it: the channel fires once, at its next change, creation or
// deletion, or when the session ends.
func (c *Cluster) ReadSecurity(name string) (data []byte, exists bool, st Stamp, watch <-chan zk.Event, err error) {
	p := c.SecurityPath(name)
	for {
		data, zst, ch, err := c.conn.GetW(p)
		if err == nil {
			return data, true, Stamp{zst.Czxid, zst.Mzxid}, ch, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return nil, false, Stamp{}, nil, fmt.Errorf("cannot read znode %s: %w", p, noAuth(err))
		}
		ok, _, ch, err := c.conn.ExistsW(p) // missing: watch for its creation
		if err != nil {
			return nil, false, Stamp{}, nil, fmt.Errorf("cannot read znode %s: %w", p, noAuth(err))
		}
		if !ok {
			return nil, false, Stamp{}, ch, nil
		}
		// Created between the two calls: read it.
	}
}

// StatSecurity returns a security znode's stamp (zero when missing), without a watch.
func (c *Cluster) StatSecurity(name string) (Stamp, error) {
	p := c.SecurityPath(name)
	ok, zst, err := c.conn.Exists(p)
	if err != nil {
		return Stamp{}, fmt.Errorf("cannot read znode %s: %w", p, noAuth(err))
	}
	if !ok {
		return Stamp{}, nil
	}
	return Stamp{zst.Czxid, zst.Mzxid}, nil
}

// EditSecurity replaces a security znode's content with what edit makes of it (old nil
// and exists false when the znode is missing; it is created then, with its parents).
// The write is conditional on the version read: when another editor wrote in between,
// edit runs again on the newer content, so two edits at once both land. An error from
// edit writes nothing and is returned as it is.
func (c *Cluster) EditSecurity(name string, edit func(old []byte, exists bool) ([]byte, error)) error {
	p := c.SecurityPath(name)
	for range maxEditConflicts {
		old, st, err := c.conn.Get(p)
		exists := err == nil
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("cannot read znode %s: %w", p, noAuth(err))
		}
		data, err := edit(old, exists)
		if err != nil {
			return err
		}
		if len(data) > maxSecurityData {
			return fmt.Errorf("cannot write znode %s: %d bytes, ZooKeeper takes at most %d", p, len(data), maxSecurityData)
		}
		if exists {
			_, err = c.conn.Set(p, data, st.Version)
		} else if err = c.ensureSecurityDir(); err == nil {
			_, err = c.conn.Create(p, data, 0, c.securityACL())
		}
		switch {
		case err == nil:
			return c.lockSecurity() // znodes made before the digest was given
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode):
			continue // another editor wrote (or deleted) it since the read: again
		default:
			return fmt.Errorf("cannot write znode %s: %w", p, noAuth(err))
		}
	}
	return fmt.Errorf("cannot write znode %s: %d other edits landed first, one after the other; try again", p, maxEditConflicts)
}
