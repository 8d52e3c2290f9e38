package auth

import (
	"errors"
	"fmt"

	"sluice/auth/acl"
	"sluice/auth/scram"
	"sluice/internal/atomicfile"
)

// The edits of `sluice user` and `sluice acl`. Each reads its file, changes it and
// replaces it whole (atomicfile: a broker reloading it sees the old file or the new, and
// two editors at once are serialized), mode 0600.

// ErrUserExists is returned by AddUser for a user already in the file.
var ErrUserExists = errors.New("user exists")

// ErrNoSuchUser is returned by RemoveUser for a user not in the file.
var ErrNoSuchUser = errors.New("no such user")

// ErrNoSuchGrant is returned by RemoveGrant when no rule matched.
var ErrNoSuchGrant = errors.New("no such grant")

// filePerm is the mode of the files the edits write.
const filePerm = 0o600

// AddUser adds a user with credentials derived from password (a new random salt,
// iterations rounds) to the users file at path, making the file if there is none. An
// existing user is ErrUserExists unless replace is set.
func AddUser(path, name, password string, iterations int, replace bool) error {
	if err := CheckUserName(name); err != nil {
		return err
	}
	if password == "" {
		return errors.New("empty password")
	}
	creds, err := scram.Derive(password, iterations)
	if err != nil {
		return fmt.Errorf("cannot derive credentials: %w", err)
	}
	return editUsers(path, func(u *Users) error {
		if _, ok := u.Lookup(name); ok && !replace {
			return fmt.Errorf("cannot add user %s: %w", name, ErrUserExists)
		}
		return u.Set(name, creds)
	})
}

// RemoveUser removes a user from the users file at path.
func RemoveUser(path, name string) error {
	return editUsers(path, func(u *Users) error {
		if !u.Remove(name) {
			return fmt.Errorf("cannot remove user %s: %w", name, ErrNoSuchUser)
		}
		return nil
	})
}

// ReadUsers reads the users file at path (for listing).
func ReadUsers(path string) (*Users, error) {
	raw, err := readPrivate(path)
	if err != nil {
		return nil, err
	}
	u, err := ParseUsers(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return u, nil
}

func editUsers(path string, edit func(*Users) error) error {
	return atomicfile.Update(path, filePerm, func(old []byte, exists bool) ([]byte, error) {
		var u *Users
		var err error
		if exists {
			// A file without a key line (made by hand, or empty) gets a random one now.
			if u, err = ParseUsers(old); err == nil && u.derivedKey {
				err = u.newKey()
			}
		} else {
			u, err = NewUsers()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := edit(u); err != nil {
			return nil, err
		}
		return u.Format(), nil
	})
}

// AddGrant grants ops to user on the topics p covers, in the ACL file at path (made if
// missing).
func AddGrant(path, user string, ops acl.Op, p acl.Pattern) error {
	if err := acl.CheckUser(user); err != nil {
		return err
	}
	return editRules(path, func(rules []acl.Rule) ([]acl.Rule, error) {
		return acl.Add(rules, user, ops, p), nil
	})
}

// RemoveGrant takes ops (every operation when 0) from user on exactly the pattern p in
// the ACL file at path; ErrNoSuchGrant when no rule held any of them.
func RemoveGrant(path, user string, ops acl.Op, p acl.Pattern) error {
	return editRules(path, func(rules []acl.Rule) ([]acl.Rule, error) {
		out, removed := acl.Remove(rules, user, ops, p)
		if !removed {
			return nil, fmt.Errorf("cannot remove %s's grant on %s: %w", user, p, ErrNoSuchGrant)
		}
		return out, nil
	})
}

func editRules(path string, edit func([]acl.Rule) ([]acl.Rule, error)) error {
	return atomicfile.Update(path, filePerm, func(old []byte, _ bool) ([]byte, error) {
		rules, err := acl.Parse(old)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if rules, err = edit(rules); err != nil {
			return nil, err
		}
		return acl.Format(rules), nil
	})
}
