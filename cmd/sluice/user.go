package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"

	"sluice/admin"
	"sluice/auth"
	"sluice/auth/scram"
)

// The user commands edit the users file a broker with auth.users reads (and reloads on
// a change or SIGHUP), or with --zk the users znode brokers with auth.source zk follow:
// `sluice user add NAME`, `sluice user remove NAME`, `sluice user list`. The password never comes from the command line, where other users of the host
// could read it: from the first line of stdin, or of --password-file.

// defaultUsersFile is where the commands look without --file (the deploy/ layout).
const defaultUsersFile = "/etc/sluice/users"

// usersStore defines --file, --zk and --zk-root.
func usersStore(fs *flag.FlagSet) authStore {
	file := fs.String("file", defaultUsersFile, "the users file (the broker's auth.users)")
	return newAuthStore(fs, file, admin.UsersZnode)
}

func userAdd(args []string, stdin io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("user add", flag.ContinueOnError)
	store := usersStore(fs)
	pwFile := fs.String("password-file", "", "read the password from the first line of this file (default: the first line of stdin)")
	iterations := fs.Int("iterations", scram.MinIterations, "PBKDF2 rounds of the stored key (at least 4096; each client connection pays them once)")
	replace := fs.Bool("replace", false, "replace the user's password if the user exists")
	name, err := parseUserName(fs, args, store)
	if err != nil {
		return err
	}
	if *iterations < scram.MinIterations {
		return usageError{fmt.Sprintf("--iterations %d below %d", *iterations, scram.MinIterations)}
	}
	password, err := readPassword(*pwFile, stdin)
	if err != nil {
		return err
	}
	e, err := auth.AddUserEdit(name, password, *iterations, *replace)
	if err != nil {
		return err
	}
	where, err := store.edit(e)
	if err != nil {
		if errors.Is(err, auth.ErrUserExists) {
			return fmt.Errorf("%w (give --replace to change its password)", err)
		}
		return err
	}
	fmt.Fprintf(stdout, "user %s written to %s\n", name, where)
	return nil
}

// readPassword reads the password from the first line of path, or of stdin.
func readPassword(path string, stdin io.Reader) (string, error) {
	var password string
	if path != "" {
		pw, err := readPasswordFile(path)
		if err != nil {
			return "", usageError{"--password-file: " + err.Error()}
		}
		password = pw
	} else {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("cannot read the password from stdin: %w", err)
		}
		password = firstLine(line)
	}
	if password == "" {
		return "", usageError{"empty password: give it on the first line of stdin or of --password-file"}
	}
	return password, nil
}

func userRemove(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("user remove", flag.ContinueOnError)
	store := usersStore(fs)
	name, err := parseUserName(fs, args, store)
	if err != nil {
		return err
	}
	where, err := store.edit(auth.RemoveUserEdit(name))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "user %s removed from %s\n", name, where)
	return nil
}

func userList(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("user list", flag.ContinueOnError)
	store := usersStore(fs)
	if err := noPositional(fs, args); err != nil {
		return err
	}
	if err := store.check(); err != nil {
		return err
	}
	u, err := store.users()
	if err != nil {
		return err
	}
	for _, name := range u.Names() {
		c, _ := u.Lookup(name)
		fmt.Fprintf(stdout, "%s\t%s\titerations=%d\n", name, auth.Mechanism, c.Iterations)
	}
	return nil
}

// parseUserName parses flags around the single NAME argument and checks the name and
// the store flags.
func parseUserName(fs *flag.FlagSet, args []string, store authStore) (string, error) {
	name, err := parseOneArg(fs, args, "user name")
	if err != nil {
		return "", err
	}
	if err := store.check(); err != nil {
		return "", err
	}
	if err := auth.CheckUserName(name); err != nil {
		return "", usageError{err.Error()}
	}
	return name, nil
}
