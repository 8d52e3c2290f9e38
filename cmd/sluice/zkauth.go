package main

import (
	"fmt"
	"os"

	"sluice/admin"
)

// readDigest reads a ZooKeeper digest credential (zk.auth, --zk-auth): "user:password"
// on the first line of a file that only its owner may read (it is a secret, like the
// users file).
func readDigest(file string) (admin.Digest, error) {
	st, err := os.Stat(file)
	if err != nil {
		return admin.Digest{}, fmt.Errorf("cannot read the ZooKeeper credential: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return admin.Digest{}, fmt.Errorf("the ZooKeeper credential %s is mode %v: others may read it; chmod 600 it", file, st.Mode().Perm())
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return admin.Digest{}, fmt.Errorf("cannot read the ZooKeeper credential: %w", err)
	}
	d, err := admin.ParseDigest(string(raw))
	if err != nil {
		return admin.Digest{}, fmt.Errorf("the ZooKeeper credential %s: %w", file, err)
	}
	return d, nil
}
