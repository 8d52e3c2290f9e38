package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"sluice/client"
)

// The flag helpers of every subcommand. Flags are parsed with their output discarded:
// errors come back as a usageError (exit 2, usage printed by run), and -help / -h as a
// helpError (usage and flags printed to stdout by run, exit 0).

// usageError makes run print the error and the command's usage, and exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// helpError makes run print the command's usage and flags to stdout and exit 0: the user
// asked for them with -help or -h.
type helpError struct{ fs *flag.FlagSet }

func (e helpError) Error() string { return "help requested" }

// parseFlags parses args with fs and refuses negative durations: no duration flag of
// sluice means anything below zero.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpError{fs}
		}
		return usageError{err.Error()}
	}
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok {
			if d, ok := g.Get().(time.Duration); ok && d < 0 {
				bad = append(bad, fmt.Sprintf("--%s %v: must not be negative", f.Name, d))
			}
		}
	})
	if len(bad) > 0 {
		return usageError{strings.Join(bad, "; ")}
	}
	return nil
}

// parseInterspersed parses flags that may come before, between or after positional
// arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// parseWithName parses flags placed before or after the single NAME argument, a topic.
func parseWithName(fs *flag.FlagSet, args []string) (string, error) {
	return parseOneArg(fs, args, "topic name")
}

// parseOneArg parses flags placed before or after the single argument, a what.
func parseOneArg(fs *flag.FlagSet, args []string, what string) (string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usageError{"want exactly one " + what}
	}
	return pos[0], nil
}

// noPositional refuses positional arguments.
func noPositional(fs *flag.FlagSet, args []string) error {
	pos, err := parseInterspersed(fs, args)
	if err == nil && len(pos) > 0 {
		err = usageError{"unexpected argument " + strings.Join(pos, " ")}
	}
	return err
}

// brokerFlag defines --broker, the seed broker of every client command.
func brokerFlag(fs *flag.FlagSet) *string {
	return fs.String("broker", "127.0.0.1:9440", "broker address host:port")
}

// securityFlags are the flags of every client command that say how to reach a secured
// broker: --tls-ca, --tls-cert and --tls-key, --user and --password-file.
type securityFlags struct {
	ca, cert, key      *string
	user, passwordFile *string
}

func newSecurityFlags(fs *flag.FlagSet) securityFlags {
	return securityFlags{
		ca:           fs.String("tls-ca", "", "connect with TLS, trusting the CA certificates in this PEM file"),
		cert:         fs.String("tls-cert", "", "client certificate (PEM), for a broker that asks for one (with --tls-key)"),
		key:          fs.String("tls-key", "", "the client certificate's private key (PEM)"),
		user:         fs.String("user", "", "authenticate as this user (SCRAM-SHA-256); the password comes from --password-file or $"+passwordEnv),
		passwordFile: fs.String("password-file", "", "with --user: read the password from the first line of this file"),
	}
}

// passwordEnv holds the password of --user when --password-file is not given.
const passwordEnv = "SLUICE_PASSWORD"

// opts returns the client options the flags ask for: TLS with --tls-ca, authentication
// with --user.
func (t securityFlags) opts() ([]client.Opt, error) {
	opts, err := t.tlsOpts()
	if err != nil || *t.user == "" {
		if err == nil && *t.passwordFile != "" {
			err = usageError{"--password-file needs --user"}
		}
		return opts, err
	}
	password := os.Getenv(passwordEnv)
	if *t.passwordFile != "" {
		if password, err = readPasswordFile(*t.passwordFile); err != nil {
			return nil, usageError{"--password-file: " + err.Error()}
		}
	}
	if password == "" {
		return nil, usageError{"--user needs a password: --password-file FILE or $" + passwordEnv}
	}
	return append(opts, client.Auth(*t.user, password)), nil
}

// readPasswordFile returns the first line of a file, without its line ending.
func readPasswordFile(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return firstLine(string(raw)), nil
}

// firstLine returns s up to its first line ending.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSuffix(line, "\r")
}

// tlsOpts returns the TLS option the flags ask for: none without --tls-ca.
func (t securityFlags) tlsOpts() ([]client.Opt, error) {
	if *t.ca == "" {
		if *t.cert != "" || *t.key != "" {
			return nil, usageError{"--tls-cert and --tls-key need --tls-ca"}
		}
		return nil, nil
	}
	pem, err := os.ReadFile(*t.ca)
	if err != nil {
		return nil, usageError{"--tls-ca: " + err.Error()}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, usageError{"--tls-ca: no PEM certificate in " + *t.ca}
	}
	conf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if (*t.cert == "") != (*t.key == "") {
		return nil, usageError{"--tls-cert and --tls-key go together"}
	}
	if *t.cert != "" {
		cert, err := tls.LoadX509KeyPair(*t.cert, *t.key)
		if err != nil {
			return nil, usageError{"--tls-cert/--tls-key: " + err.Error()}
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return []client.Opt{client.TLS(conf)}, nil
}
