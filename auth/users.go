package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"sluice/auth/scram"
	"sluice/internal/lines"
)

// Users are the contents of a users file. Treat a *Users as immutable once in a
// Snapshot; the edit methods are for the commands that write the file.
type Users struct {
	creds map[string]scram.Credentials
	// fakeKey makes the salts of unknown users (see the package comment).
	fakeKey []byte
	// derivedKey: the file had no key line; fakeKey was derived from its ServerKeys.
	derivedKey bool
	// fakeIter is the iteration count unknown users are answered: the most common one.
	fakeIter int
}

// Mechanism is the users file's name of the one mechanism served.
const Mechanism = "SCRAM-SHA-256"

// maxIterations bounds the iteration count a users file may give: clients refuse more.
const maxIterations = 1 << 24

// fakeKeySize is the size of the key that makes unknown users' salts.
const fakeKeySize = 32

// NewUsers returns an empty user list with a new random key.
func NewUsers() (*Users, error) {
	u := &Users{creds: map[string]scram.Credentials{}}
	if err := u.newKey(); err != nil {
		return nil, err
	}
	u.settle()
	return u, nil
}

// newKey gives the list a new random key.
func (u *Users) newKey() error {
	key := make([]byte, fakeKeySize)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("cannot make the users file's key: %w", err)
	}
	u.fakeKey, u.derivedKey = key, false
	return nil
}

// CheckUserName returns an error unless name is 1 to 255 bytes of [a-zA-Z0-9._@-].
func CheckUserName(name string) error {
	if name == "" || len(name) > 255 {
		return fmt.Errorf("user name of %d bytes, want 1 to 255", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._@-", c) >= 0) {
			return fmt.Errorf("user name byte %d is not one of [a-zA-Z0-9._@-]", i)
		}
	}
	return nil
}

// Lookup returns a user's credentials.
func (u *Users) Lookup(name string) (scram.Credentials, bool) {
	c, ok := u.creds[name]
	return c, ok
}

// Fake returns the credentials an unknown user's exchange runs with: a salt derived from
// the file's key and the name (the same every time it is asked), the iteration count
// most users have, and keys no password gives. The exchange fails at the proof.
func (u *Users) Fake(name string) scram.Credentials {
	derive := func(label string) []byte {
		h := hmac.New(sha256.New, u.fakeKey)
		h.Write([]byte(label))
		h.Write([]byte{0})
		h.Write([]byte(name))
		return h.Sum(nil)
	}
	return scram.Credentials{Salt: derive("salt")[:16], Iterations: u.fakeIter,
		StoredKey: derive("stored"), ServerKey: derive("server")}
}

// Names returns the user names, sorted.
func (u *Users) Names() []string {
	names := make([]string, 0, len(u.creds))
	for n := range u.creds {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Set adds or replaces a user.
func (u *Users) Set(name string, c scram.Credentials) error {
	if err := CheckUserName(name); err != nil {
		return err
	}
	if err := checkCreds(c); err != nil {
		return err
	}
	u.creds[name] = c
	u.settle()
	return nil
}

// Remove removes a user and reports whether it was there.
func (u *Users) Remove(name string) bool {
	_, ok := u.creds[name]
	delete(u.creds, name)
	u.settle()
	return ok
}

// settle recomputes what depends on the whole list: the iteration count unknown users
// are answered (the most common one; the larger on a tie).
func (u *Users) settle() {
	count := map[int]int{}
	best := scram.MinIterations
	for _, n := range u.Names() {
		it := u.creds[n].Iterations
		count[it]++
		if count[it] > count[best] || count[it] == count[best] && it > best {
			best = it
		}
	}
	u.fakeIter = best
}

func checkCreds(c scram.Credentials) error {
	switch {
	case c.Iterations < scram.MinIterations || c.Iterations > maxIterations:
		return fmt.Errorf("iteration count %d out of [%d, %d]", c.Iterations, scram.MinIterations, maxIterations)
	case len(c.Salt) < 8:
		return fmt.Errorf("salt of %d bytes, want at least 8", len(c.Salt))
	case len(c.StoredKey) != sha256.Size || len(c.ServerKey) != sha256.Size:
		return errors.New("StoredKey and ServerKey must be 32 bytes each")
	}
	return nil
}

// ParseUsers reads a users file. Errors name the line and the field, never a value:
// the values are secrets.
func ParseUsers(data []byte) (*Users, error) {
	u := &Users{creds: map[string]scram.Credentials{}}
	if err := lines.Each(data, func(line string) error { return u.parseLine(strings.Fields(line)) }); err != nil {
		return nil, fmt.Errorf("cannot parse users file: %w", err)
	}
	if u.fakeKey == nil { // a hand-made file: derive a key no client knows
		h := sha256.New()
		h.Write([]byte("sluice fake salt key"))
		for _, n := range u.Names() {
			h.Write(u.creds[n].ServerKey)
		}
		u.fakeKey, u.derivedKey = h.Sum(nil), true
	}
	u.settle()
	return u, nil
}

func (u *Users) parseLine(f []string) error {
	switch {
	case f[0] == "key" && len(f) == 2:
		if u.fakeKey != nil {
			return errors.New("a second key line")
		}
		key, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil || len(key) != fakeKeySize {
			return fmt.Errorf("the key is not %d bytes of base64", fakeKeySize)
		}
		u.fakeKey = key
		return nil
	case f[0] == "user" && len(f) == 7:
		return u.parseUser(f[1:])
	}
	return fmt.Errorf("want `key KEY` or `user NAME %s ITERATIONS SALT STOREDKEY SERVERKEY`", Mechanism)
}

func (u *Users) parseUser(f []string) error {
	name := f[0]
	if err := CheckUserName(name); err != nil {
		return err
	}
	if _, dup := u.creds[name]; dup {
		return fmt.Errorf("user %s appears twice", name)
	}
	if f[1] != Mechanism {
		return fmt.Errorf("user %s: mechanism is not %s", name, Mechanism)
	}
	it, err := strconv.Atoi(f[2])
	if err != nil {
		return fmt.Errorf("user %s: the iteration count is not a number", name)
	}
	var c scram.Credentials
	c.Iterations = it
	for i, dst := range []*[]byte{&c.Salt, &c.StoredKey, &c.ServerKey} {
		if *dst, err = base64.StdEncoding.DecodeString(f[3+i]); err != nil {
			return fmt.Errorf("user %s: the %s is not base64", name, [...]string{"salt", "StoredKey", "ServerKey"}[i])
		}
	}
	if err := checkCreds(c); err != nil {
		return fmt.Errorf("user %s: %w", name, err)
	}
	u.creds[name] = c
	return nil
}

// usersHeader starts every users file Format writes.
const usersHeader = "# sluice users: written by sluice user add/remove; keep it mode 0600.\n" +
	"# key KEY | user NAME SCRAM-SHA-256 ITERATIONS SALT STOREDKEY SERVERKEY (base64); never a password.\n"

// Format writes the users file: the key, then the users in name order.
func (u *Users) Format() []byte {
	var b bytes.Buffer
	enc := base64.StdEncoding.EncodeToString
	b.WriteString(usersHeader)
	fmt.Fprintf(&b, "key %s\n", enc(u.fakeKey))
	for _, n := range u.Names() {
		c := u.creds[n]
		fmt.Fprintf(&b, "user %s %s %d %s %s %s\n", n, Mechanism, c.Iterations, enc(c.Salt), enc(c.StoredKey), enc(c.ServerKey))
	}
	return b.Bytes()
}
