package auth

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"sluice/auth/acl"
)

// Snapshot is what a broker authenticates and authorizes with at one time: the users and
// the ACLs, read together from their files (Load) or their znodes (Parse). Immutable; a reload makes a new one.
type Snapshot struct {
	Users *Users
	ACL   *acl.Set
	// Rules are the ACL file's rules, in file order (for the log: how many there are).
	Rules []acl.Rule
}

// Load reads the users file and the ACL file. The users file must exist and must not be
// readable by group or others; a missing ACL file is no rules (nothing is allowed).
// Errors never quote the files' values.
func Load(usersPath, aclPath string) (*Snapshot, error) {
	users, err := ReadUsers(usersPath)
	if err != nil {
		return nil, err
	}
	rules, err := LoadRules(aclPath)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Users: users, ACL: acl.NewSet(rules), Rules: rules}, nil
}

// Parse makes a Snapshot of a users content and an ACL content (nil: no rules), in the
// files' formats: what distributed mode keeps in ZooKeeper. Errors never quote a value.
func Parse(users, acls []byte) (*Snapshot, error) {
	u, err := ParseUsers(users)
	if err != nil {
		return nil, err
	}
	rules, err := acl.Parse(acls)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Users: u, ACL: acl.NewSet(rules), Rules: rules}, nil
}

// Empty returns a Snapshot with no users and no rules: every exchange fails and nothing
// is allowed. A broker whose users were deleted serves it (fail closed).
func Empty() (*Snapshot, error) {
	u, err := NewUsers()
	if err != nil {
		return nil, err
	}
	return &Snapshot{Users: u, ACL: acl.NewSet(nil)}, nil
}

// LoadRules reads an ACL file; a missing one is no rules. A file that group or others
// may write is refused: whoever can write it grants themselves anything.
func LoadRules(path string) ([]acl.Rule, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the ACL file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot read the ACL file: %w", err)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("the ACL file %s has mode %v: whoever may write it grants anything, make it writable by its owner only (chmod 600 or 644)", path, st.Mode().Perm())
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("cannot read the ACL file: %w", err)
	}
	rules, err := acl.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rules, nil
}

// readPrivate reads a file that must be readable by its owner only.
func readPrivate(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the users file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot read the users file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the users file %s has mode %v: it holds secrets, make it readable by its owner only (chmod 600)", path, st.Mode().Perm())
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("cannot read the users file: %w", err)
	}
	return raw, nil
}
