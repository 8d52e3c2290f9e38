package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"sluice/admin"
	"sluice/auth"
)

// Users and ACLs from ZooKeeper (auth.source = zk; docs/security.md, "Distributed
// mode"): the broker reads ROOT/security/users and ROOT/security/acls, in the files'
// formats, and follows them: a watch on each wakes the reload watcher at a change, and
// it also compares the znodes' zxids every ReloadInterval. A watch that fired (also at
// the end of a session, which takes its watches along) or a read that failed makes the
// next look read both again, which leaves new watches. Fail closed:
//
//   - at start, a users znode that is missing or cannot be read or parsed stops the
//     start (as a users file does);
//   - content that does not parse, or a read that fails (ZooKeeper unreachable), keeps
//     the last good snapshot: logged, sluice_auth_reloads_total{result="failed"} and
//     sluice_auth_reload_failing;
//   - a users znode deleted while the broker runs leaves it with no users: every
//     connection is unauthenticated at its next request, until the znode is back. A
//     deletion is someone's act, not a torn read, and the broker never serves users
//     the cluster no longer has;
//   - a missing ACL znode is no grants, as a missing ACL file.

// errNoUsersZnode is a users znode that does not exist.
var errNoUsersZnode = errors.New("the users znode does not exist (sluice user add --zk ... makes it)")

// zkSource reads the two znodes through the broker's cluster session.
type zkSource struct {
	c      *admin.Cluster
	stop   <-chan struct{}
	log    *slog.Logger
	stamps [2]admin.Stamp // the znodes as last read
	loaded bool           // a snapshot was made from the znodes before
	wakeCh chan struct{}  // one slot: a watch fired
	// fired is set when a watch fires: the next look reads again, whatever the zxids
	// say. A watch also fires when its session ends, and only a read leaves new ones.
	fired atomic.Bool
}

func newZKSource(c *admin.Cluster, stop <-chan struct{}, log *slog.Logger) *zkSource {
	return &zkSource{c: c, stop: stop, log: log, wakeCh: make(chan struct{}, 1)}
}

// load reads both znodes, leaving a watch on each.
func (z *zkSource) load() (*auth.Snapshot, error) {
	z.fired.Store(false)
	users, ok, ust, uw, err := z.c.ReadSecurity(admin.UsersZnode)
	if err != nil {
		z.fired.Store(true) // no watch left: the next look reads again
		return nil, err
	}
	acls, _, ast, aw, err := z.c.ReadSecurity(admin.ACLsZnode)
	if err != nil {
		z.fired.Store(true)
		return nil, err
	}
	z.stamps = [2]admin.Stamp{ust, ast}
	go func() { // ends at the next change of either, or at the end of the session
		select {
		case <-uw:
		case <-aw:
		case <-z.stop:
			return
		}
		z.fired.Store(true)
		select {
		case z.wakeCh <- struct{}{}:
		default:
		}
	}()
	if !ok {
		if !z.loaded {
			return nil, fmt.Errorf("%s: %w", z.c.SecurityPath(admin.UsersZnode), errNoUsersZnode)
		}
		z.log.Error("THE USERS ZNODE WAS DELETED: every connection is refused (no users) until it exists again",
			"znode", z.c.SecurityPath(admin.UsersZnode))
		return auth.Empty()
	}
	snap, err := auth.Parse(users, acls)
	if err != nil {
		return nil, fmt.Errorf("znodes %s and %s: %w", z.c.SecurityPath(admin.UsersZnode), z.c.SecurityPath(admin.ACLsZnode), err)
	}
	z.loaded = true
	return snap, nil
}

// changed reports a fired watch, else compares the znodes' stamps with the last read's.
// A failed look (ZooKeeper unreachable) reports no change: the current snapshot stays,
// and the next look tries again.
func (z *zkSource) changed() bool {
	if z.fired.Load() {
		return true
	}
	for i, name := range []string{admin.UsersZnode, admin.ACLsZnode} {
		st, err := z.c.StatSecurity(name)
		if err != nil {
			z.log.Debug("cannot look at the users and ACL znodes", "err", err)
			return false
		}
		if st != z.stamps[i] {
			return true
		}
	}
	return false
}

func (z *zkSource) wake() <-chan struct{} { return z.wakeCh }
func (z *zkSource) describe() []any {
	return []any{"users_znode", z.c.SecurityPath(admin.UsersZnode), "acl_znode", z.c.SecurityPath(admin.ACLsZnode)}
}
