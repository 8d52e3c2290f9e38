package admin

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
)

// ZooKeeper digest authentication (docs/security.md, "Who may edit"). A session dialed
// with a Digest authenticates with ZooKeeper's digest scheme as soon as it exists (and,
// through go-zookeeper, again on every reconnection). Its edits of the security znodes
// then write them, and their parent ROOT/security, with an ACL that gives everything to
// that credential and nothing to anyone else: a session without it can neither read
// the users' verifiers nor change users or grants (ErrNoAuth). Znodes that exist with
// another ACL (made before the credential was given) get the digest ACL at such an
// edit. The cluster's other znodes keep the open ACL.

// Digest is a ZooKeeper digest credential, a user and a password (zk.auth).
type Digest struct{ User, Password string }

// ParseDigest parses "user:password" (the first line of a zk.auth file).
func ParseDigest(s string) (Digest, error) {
	line, _, _ := strings.Cut(s, "\n")
	user, password, ok := strings.Cut(strings.TrimSuffix(line, "\r"), ":")
	if !ok || user == "" || password == "" {
		return Digest{}, errors.New("want user:password on the first line")
	}
	return Digest{User: user, Password: password}, nil
}

// DialOption changes how Dial connects.
type DialOption func(*Cluster)

// WithDigest authenticates the session with d (zk.auth), and makes its edits of the
// security znodes readable and writable by d alone.
func WithDigest(d Digest) DialOption {
	return func(c *Cluster) { c.digest = &d }
}

// ErrNoAuth is matched (errors.Is) by the error of a read or an edit of a security
// znode that ZooKeeper refused for want of the credential its ACL names.
var ErrNoAuth = errors.New("ZooKeeper refused the session: the znode's ACL names a digest credential this session has not (give zk.auth, or --zk-auth FILE, with the cluster's)")

// noAuth marks ZooKeeper's refusal for want of a credential with ErrNoAuth.
func noAuth(err error) error {
	if errors.Is(err, zk.ErrNoAuth) {
		return fmt.Errorf("%w: %w", ErrNoAuth, err)
	}
	return err
}

// addAuth authenticates the session with its digest, if it has one.
func (c *Cluster) addAuth() error {
	if c.digest == nil {
		return nil
	}
	if err := c.conn.AddAuth("digest", []byte(c.digest.User+":"+c.digest.Password)); err != nil {
		return fmt.Errorf("cannot authenticate to ZooKeeper as %s: %w", c.digest.User, err)
	}
	return nil
}

// securityACL is the ACL of the security znodes this session writes: the digest's
// alone, or open without one.
func (c *Cluster) securityACL() []zk.ACL {
	if c.digest == nil {
		return zk.WorldACL(zk.PermAll)
	}
	return zk.DigestACL(zk.PermAll, c.digest.User, c.digest.Password)
}

// lockSecurity gives ROOT/security and the security znodes in it the digest's ACL where
// they have another; without a digest it does nothing. A znode missing is left so.
func (c *Cluster) lockSecurity() error {
	if c.digest == nil {
		return nil
	}
	want := c.securityACL()
	for _, p := range []string{path.Join(c.root, "security"), c.SecurityPath(UsersZnode), c.SecurityPath(ACLsZnode)} {
		acl, _, err := c.conn.GetACL(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err == nil && slices.Equal(acl, want) {
			continue
		}
		if err == nil {
			_, err = c.conn.SetACL(p, want, -1)
		}
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("cannot set the ACL of znode %s: %w", p, noAuth(err))
		}
	}
	return nil
}
