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

// AuthConfig turns authentication and ACLs on: with UsersFile set, every connection
// must authenticate (SCRAM-SHA-256, the authenticate API) before any other request, and
// each request needs a grant in the ACL file (deny by default). docs/security.md.
type AuthConfig struct {
	// UsersFile holds the users' credentials (package auth's format, mode 0600):
	// auth.users.
	UsersFile string
	// ACLFile holds the grants (package acl's format): auth.acls. Default: acls beside
	// the users file. A missing file is no grants.
	ACLFile string
	// FailureDelay is how long after a failed exchange's last message its answer is
	// sent, the same whatever failed: auth.failure_delay. Default 1 s.
	FailureDelay time.Duration
	// ReloadInterval is how often the broker looks whether either file changed (its
	// modification time, size or inode) and reads both again: auth.reload_interval.
	// Default 2 s. SIGHUP reloads at once (Broker.ReloadAuth).
	ReloadInterval time.Duration
}

// Enabled reports whether authentication is on.
func (c *AuthConfig) Enabled() bool { return c.UsersFile != "" }

func (c *AuthConfig) ensureDefaults() {
	if c.Enabled() && c.ACLFile == "" {
		c.ACLFile = filepath.Join(filepath.Dir(c.UsersFile), "acls")
	}
	if c.FailureDelay == 0 {
		c.FailureDelay = time.Second
	}
	if c.ReloadInterval == 0 {
		c.ReloadInterval = 2 * time.Second
	}
}

func (c *AuthConfig) validate() error {
	if c.FailureDelay < 0 || c.ReloadInterval < 10*time.Millisecond {
		return fmt.Errorf("auth.failure_delay %v must not be negative and auth.reload_interval %v must be at least 10ms",
			c.FailureDelay, c.ReloadInterval)
	}
	if !c.Enabled() && c.ACLFile != "" {
		return errors.New("auth.acls needs auth.users")
	}
	return nil
}

// authState is the broker's side of authentication, nil when it is off: the current
// snapshot of the users and ACL files, swapped whole on a reload (connections compare
// their snapshot pointer on each request: no lock), the reload watcher and the counters.
type authState struct {
	cfg  AuthConfig
	snap atomic.Pointer[auth.Snapshot]

	reloadMu sync.Mutex    // one reload at a time (SIGHUP and the watcher)
	stamps   [2]fileStamp  // the files as last loaded; under reloadMu
	stop     chan struct{} // closed by Shutdown: the watcher ends
	done     chan struct{}

	ok, failed, invalid      atomic.Uint64 // exchanges: passed, failed proof, malformed or refused
	required, denied         atomic.Uint64 // requests refused auth_required, not_authorized
	reloadsOK, reloadsFailed atomic.Uint64
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

// startAuth loads the users and ACL files (a failure stops the start) and starts the
// watcher; it does nothing when authentication is off.
func (b *Broker) startAuth() error {
	if !b.cfg.Auth.Enabled() {
		return nil
	}
	a := &authState{cfg: b.cfg.Auth, stop: make(chan struct{}), done: make(chan struct{})}
	a.stamps = a.currentStamps()
	snap, err := auth.Load(a.cfg.UsersFile, a.cfg.ACLFile)
	if err != nil {
		return fmt.Errorf("cannot start with authentication: %w", err)
	}
	a.snap.Store(snap)
	b.auth = a
	if _, err := os.Stat(a.cfg.ACLFile); err != nil {
		b.cfg.Logger.Warn("no ACL file: every request but authentication is refused not_authorized until one grants something",
			"acls", a.cfg.ACLFile)
	}
	b.cfg.Logger.Info("authentication on", "users_file", a.cfg.UsersFile, "users", len(snap.Users.Names()),
		"acl_file", a.cfg.ACLFile, "grants", len(snap.Rules))
	go b.watchAuth(a)
	return nil
}

func (a *authState) currentStamps() [2]fileStamp {
	return [2]fileStamp{stampOf(a.cfg.UsersFile), stampOf(a.cfg.ACLFile)}
}

// stopAuth ends the watcher.
func (b *Broker) stopAuth() {
	if b.auth != nil {
		close(b.auth.stop)
		<-b.auth.done
	}
}

// watchAuth reloads the files when either changes, every ReloadInterval.
func (b *Broker) watchAuth(a *authState) {
	defer close(a.done)
	t := time.NewTicker(a.cfg.ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			a.reloadMu.Lock()
			changed := a.currentStamps() != a.stamps
			a.reloadMu.Unlock()
			if changed {
				b.ReloadAuth() // logs its result
			}
		}
	}
}

// ReloadAuth reads the users and ACL files again (SIGHUP, or the watcher seeing a
// change). Open connections stay open: at its next request, a connection whose user was
// removed is unauthenticated, and every other one is checked against the new grants. A
// file that does not load leaves the current ones and is logged (never its values).
// Without authentication it does nothing.
func (b *Broker) ReloadAuth() error {
	a := b.auth
	if a == nil {
		return nil
	}
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	stamps := a.currentStamps() // before reading: a change during the read is seen next time
	snap, err := auth.Load(a.cfg.UsersFile, a.cfg.ACLFile)
	a.stamps = stamps
	if err != nil {
		a.reloadsFailed.Add(1)
		b.cfg.Logger.Error("users/ACL reload failed: the current users and grants stay", "err", err)
		return err
	}
	a.snap.Store(snap)
	a.reloadsOK.Add(1)
	b.cfg.Logger.Info("users and ACLs reloaded", "users", len(snap.Users.Names()), "grants", len(snap.Rules))
	return nil
}
