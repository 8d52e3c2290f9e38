package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sluice/auth"
)

// AuthConfig turns authentication and ACLs on: with UsersFile set (or FromZooKeeper),
// every connection must authenticate (SCRAM-SHA-256, the authenticate API) before any
// other request, and each request needs a grant in the ACLs (deny by default).
// docs/security.md.
type AuthConfig struct {
	// UsersFile holds the users' credentials (package auth's format, mode 0600):
	// auth.users.
	UsersFile string
	// ACLFile holds the grants (package acl's format): auth.acls. Default: acls beside
	// the users file. A missing file is no grants.
	ACLFile string
	// FromZooKeeper takes the users and grants from the cluster's znodes
	// ROOT/security/users and ROOT/security/acls instead of files, and follows every
	// change to them (authzk.go): auth.source = zk. Needs Cluster; excludes the files.
	FromZooKeeper bool
	// FailureDelay is how long after a failed exchange's last message its answer is
	// sent, the same whatever failed: auth.failure_delay. Default 1 s.
	FailureDelay time.Duration
	// ReloadInterval is how often the broker looks whether either file (or znode)
	// changed (a file's modification time, size or inode; a znode's zxids) and reads
	// both again: auth.reload_interval. Default 2 s. SIGHUP reloads at once
	// (Broker.ReloadAuth); znodes are also watched, so a change applies sooner.
	ReloadInterval time.Duration
	// Timeout is how long a connection may stay unauthenticated, from its start or from
	// losing its user (a reload that removed it, a new exchange), before it is answered
	// auth_required and closed: auth.timeout. Default 30 s. Without it a client that
	// never authenticates holds its connection (and, behind TLS, one of the front's
	// connection slots) for good.
	Timeout time.Duration
}

// Enabled reports whether authentication is on.
func (c *AuthConfig) Enabled() bool { return c.UsersFile != "" || c.FromZooKeeper }

func (c *AuthConfig) ensureDefaults() {
	if c.UsersFile != "" && c.ACLFile == "" {
		c.ACLFile = filepath.Join(filepath.Dir(c.UsersFile), "acls")
	}
	if c.FailureDelay == 0 {
		c.FailureDelay = time.Second
	}
	if c.ReloadInterval == 0 {
		c.ReloadInterval = 2 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
}

func (c *AuthConfig) validate() error {
	if c.FailureDelay < 0 || c.ReloadInterval < 10*time.Millisecond {
		return fmt.Errorf("auth.failure_delay %v must not be negative and auth.reload_interval %v must be at least 10ms",
			c.FailureDelay, c.ReloadInterval)
	}
	if c.Timeout < 100*time.Millisecond {
		return fmt.Errorf("auth.timeout %v must be at least 100ms", c.Timeout)
	}
	if c.FromZooKeeper && (c.UsersFile != "" || c.ACLFile != "") {
		return errors.New("auth.source zk takes the users and ACLs from ZooKeeper: auth.users and auth.acls must not be set")
	}
	if !c.Enabled() && c.ACLFile != "" {
		return errors.New("auth.acls needs auth.users")
	}
	return nil
}

// String renders the settings for the startup log.
func (c *AuthConfig) String() string {
	src := fmt.Sprintf("users=%s acls=%s", c.UsersFile, c.ACLFile)
	if c.FromZooKeeper {
		src = "source=zk"
	}
	return fmt.Sprintf("%s failure_delay=%v reload_interval=%v timeout=%v", src, c.FailureDelay, c.ReloadInterval, c.Timeout)
}

// authState is the broker's side of authentication, nil when it is off: the current
// snapshot of the users and ACLs, swapped whole on a reload (connections compare their
// snapshot pointer on each request: no lock), the reload watcher and the counters.
type authState struct {
	cfg  AuthConfig
	snap atomic.Pointer[auth.Snapshot]
	src  authSource

	reloadMu sync.Mutex    // one reload at a time (SIGHUP and the watcher); guards src
	stop     chan struct{} // closed by Shutdown: the watcher ends
	done     chan struct{}

	ok, failed, invalid      atomic.Uint64 // exchanges: passed, failed proof, malformed or refused
	required, denied         atomic.Uint64 // requests refused auth_required, not_authorized
	reloadsOK, reloadsFailed atomic.Uint64
	// failing is set while the newest content does not load: an older snapshot serves.
	failing atomic.Bool
}

// authSource is where the users and ACLs come from: two files (fileSource) or the
// cluster's two znodes (zkSource, authzk.go). Its methods are called under reloadMu.
type authSource interface {
	// load reads both and makes a snapshot; it remembers what it read, for changed.
	load() (*auth.Snapshot, error)
	// changed reports whether either may differ from what load last read.
	changed() bool
	// wake fires when a change may have happened before the next look; nil: never.
	wake() <-chan struct{}
	// describe returns log attributes naming the source.
	describe() []any
}

// fileSource reads the users file and the ACL file.
type fileSource struct {
	users, acls string
	stamps      [2]fileStamp // the files as last loaded
}

// fileStamp tells whether a file changed: its identity, size and modification time.
type fileStamp struct {
	exists       bool
	dev, ino     uint64
	size, mtimeN int64
}

func stampOf(path string) fileStamp {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	s := fileStamp{exists: true, size: st.Size(), mtimeN: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = uint64(sys.Dev), sys.Ino
	}
	return s
}

func (f *fileSource) current() [2]fileStamp { return [2]fileStamp{stampOf(f.users), stampOf(f.acls)} }

func (f *fileSource) load() (*auth.Snapshot, error) {
	stamps := f.current() // before reading: a change during the read is seen next time
	snap, err := auth.Load(f.users, f.acls)
	f.stamps = stamps
	return snap, err
}

func (f *fileSource) changed() bool         { return f.current() != f.stamps }
func (f *fileSource) wake() <-chan struct{} { return nil }
func (f *fileSource) describe() []any       { return []any{"users_file", f.users, "acl_file", f.acls} }

// startAuth loads the users and ACLs (a failure stops the start) and starts the watcher;
// it does nothing when authentication is off. In a cluster it runs after dialCluster.
func (b *Broker) startAuth() error {
	if !b.cfg.Auth.Enabled() {
		return nil
	}
	a := &authState{cfg: b.cfg.Auth, stop: make(chan struct{}), done: make(chan struct{})}
	if a.cfg.FromZooKeeper {
		a.src = newZKSource(b.cl.c, a.stop, b.cfg.Logger)
	} else {
		a.src = &fileSource{users: a.cfg.UsersFile, acls: a.cfg.ACLFile}
	}
	snap, err := a.src.load()
	if err != nil {
		return fmt.Errorf("cannot start with authentication: %w", err)
	}
	a.snap.Store(snap)
	b.auth = a
	if len(snap.Rules) == 0 {
		b.cfg.Logger.Warn("no grants: every request but authentication is refused not_authorized until one grants something",
			a.src.describe()...)
	}
	b.cfg.Logger.Info("authentication on", append(a.src.describe(), "users", len(snap.Users.Names()), "grants", len(snap.Rules))...)
	go b.watchAuth(a)
	return nil
}

// stopAuth ends the watcher.
func (b *Broker) stopAuth() {
	if b.auth != nil {
		close(b.auth.stop)
		<-b.auth.done
	}
}

// watchAuth reloads the users and ACLs when either changes: it looks every
// ReloadInterval, at once when the source wakes it (a znode's watch), and after a failed
// reload again soon (from 250 ms, doubling up to ReloadInterval; the source says whether
// there is anything to read again: a file or znode that did not parse is not read
// again until it changes, a znode that could not be read is).
func (b *Broker) watchAuth(a *authState) {
	defer close(a.done)
	t := time.NewTicker(a.cfg.ReloadInterval)
	defer t.Stop()
	a.reloadMu.Lock()
	wake := a.src.wake()
	a.reloadMu.Unlock()
	var retry <-chan time.Time
	var backoff time.Duration
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		case <-wake:
		case <-retry:
		}
		retry = nil
		a.reloadMu.Lock()
		changed := a.src.changed()
		a.reloadMu.Unlock()
		if !changed {
			continue
		}
		if err := b.ReloadAuth(); err != nil { // logs its result
			backoff = min(max(2*backoff, 250*time.Millisecond), a.cfg.ReloadInterval)
			retry = time.After(backoff)
		} else {
			backoff = 0
		}
	}
}

// ReloadAuth reads the users and ACLs again (SIGHUP, or the watcher seeing a change).
// Open connections stay open: at its next request, a connection whose user was removed
// is unauthenticated, and every other one is checked against the new grants. Content
// that does not load leaves the current snapshot and is logged (never its values).
// Without authentication it does nothing.
func (b *Broker) ReloadAuth() error {
	a := b.auth
	if a == nil {
		return nil
	}
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	snap, err := a.src.load()
	if err != nil {
		a.reloadsFailed.Add(1)
		a.failing.Store(true)
		b.cfg.Logger.Error("users/ACL reload failed: the current users and grants stay", append(a.src.describe(), "err", err)...)
		return err
	}
	a.snap.Store(snap)
	a.reloadsOK.Add(1)
	a.failing.Store(false)
	b.cfg.Logger.Info("users and ACLs reloaded", "users", len(snap.Users.Names()), "grants", len(snap.Rules))
	return nil
}
