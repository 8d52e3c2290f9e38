package auth

import (
	"errors"
	"fmt"

	"sluice/auth/acl"
	"sluice/auth/scram"
	"sluice/internal/atomicfile"
)

// The edits of `sluice user` and `sluice acl`. Each is an Edit of the content, applied to
// a file by EditFile (atomicfile: a broker reloading it sees the old file or the new, and
// two editors at once are serialized; mode 0600) or, in distributed mode, to a znode by
// admin.Cluster.EditSecurity (a write conditional on the version read, made again on a
// conflict: the Edit may run more than once and must depend on old only).

// ErrUserExists is returned by AddUser for a user already in the file.
var ErrUserExists = errors.New("user exists")

// ErrNoSuchUser is returned by RemoveUser for a user not in the file.
var ErrNoSuchUser = errors.New("no such user")

// ErrNoSuchGrant is returned by RemoveGrant when no rule matched.
var ErrNoSuchGrant = errors.New("no such grant")

// filePerm is the mode of the files the edits write.
const filePerm = 0o600

// An Edit changes the content of a users file or an ACL file: old is the content now
// (nil and exists false when there is none), and what it returns replaces it whole.
// An error leaves the content as it was. Errors never quote a users file's values.
type Edit func(old []byte, exists bool) ([]byte, error)

// EditFile applies e to the file at path (made if missing; mode 0600). A content that
// does not parse is an error naming path.
func EditFile(path string, e Edit) error {
	return atomicfile.Update(path, filePerm, func(old []byte, exists bool) ([]byte, error) {
		data, err := e(old, exists)
		if pe := (parseError{}); errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return data, err
	})
}

// parseError is an Edit's error about the old content (not the edit): the caller names
// where that content is.
type parseError struct{ err error }

func (e parseError) Error() string { return e.err.Error() }
func (e parseError) Unwrap() error { return e.err }

// AddUserEdit adds a user with credentials derived from password (a new random salt,
// iterations rounds, derived once here: a retried edit does not pay them again). An
// existing user is ErrUserExists unless replace is set.
func AddUserEdit(name, password string, iterations int, replace bool) (Edit, error) {
	if err := CheckUserName(name); err != nil {
		return nil, err
	}
	if password == "" {
		return nil, errors.New("empty password")
	}
	creds, err := scram.Derive(password, iterations)
	if err != nil {
		return nil, fmt.Errorf("cannot derive credentials: %w", err)
	}
	return usersEdit(func(u *Users) error {
		if _, ok := u.Lookup(name); ok && !replace {
			return fmt.Errorf("cannot add user %s: %w", name, ErrUserExists)
		}
		return u.Set(name, creds)
	}), nil
}

// RemoveUserEdit removes a user.
func RemoveUserEdit(name string) Edit {
	return usersEdit(func(u *Users) error {
		if !u.Remove(name) {
			return fmt.Errorf("cannot remove user %s: %w", name, ErrNoSuchUser)
		}
		return nil
	})
}

// AddUser adds a user to the users file at path, making the file if there is none
// (AddUserEdit).
func AddUser(path, name, password string, iterations int, replace bool) error {
	e, err := AddUserEdit(name, password, iterations, replace)
	if err != nil {
		return err
	}
	return EditFile(path, e)
}

// RemoveUser removes a user from the users file at path.
func RemoveUser(path, name string) error { return EditFile(path, RemoveUserEdit(name)) }

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

// usersEdit makes an Edit of a users content out of an edit of its Users: content
// without a key line (made by hand, or empty) gets a random key, none gets a new list.
func usersEdit(edit func(*Users) error) Edit {
	return func(old []byte, exists bool) ([]byte, error) {
		var u *Users
		var err error
		if exists {
			if u, err = ParseUsers(old); err == nil && u.derivedKey {
				err = u.newKey()
			}
		} else {
			u, err = NewUsers()
		}
		if err != nil {
			return nil, parseError{err}
		}
		if err := edit(u); err != nil {
			return nil, err
		}
		return u.Format(), nil
	}
}

// AddGrantEdit grants ops to user on the topics p covers.
func AddGrantEdit(user string, ops acl.Op, p acl.Pattern) (Edit, error) {
	if err := acl.CheckUser(user); err != nil {
		return nil, err
	}
	return rulesEdit(func(rules []acl.Rule) ([]acl.Rule, error) {
		return acl.Add(rules, user, ops, p), nil
	}), nil
}

// RemoveGrantEdit takes ops (every operation when 0) from user on exactly the pattern p;
// ErrNoSuchGrant when no rule held any of them.
func RemoveGrantEdit(user string, ops acl.Op, p acl.Pattern) Edit {
	return rulesEdit(func(rules []acl.Rule) ([]acl.Rule, error) {
		out, removed := acl.Remove(rules, user, ops, p)
		if !removed {
			return nil, fmt.Errorf("cannot remove %s's grant on %s: %w", user, p, ErrNoSuchGrant)
		}
		return out, nil
	})
}

// AddGrant grants ops to user on the topics p covers, in the ACL file at path (made if
// missing).
func AddGrant(path, user string, ops acl.Op, p acl.Pattern) error {
	e, err := AddGrantEdit(user, ops, p)
	if err != nil {
		return err
	}
	return EditFile(path, e)
}

// RemoveGrant takes ops from user on p in the ACL file at path (RemoveGrantEdit).
func RemoveGrant(path, user string, ops acl.Op, p acl.Pattern) error {
	return EditFile(path, RemoveGrantEdit(user, ops, p))
}

func rulesEdit(edit func([]acl.Rule) ([]acl.Rule, error)) Edit {
	return func(old []byte, _ bool) ([]byte, error) {
		rules, err := acl.Parse(old)
		if err != nil {
			return nil, parseError{err}
		}
		if rules, err = edit(rules); err != nil {
			return nil, err
		}
		return acl.Format(rules), nil
	}
}
