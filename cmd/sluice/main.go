// Command sluice is the single sluice binary: the broker, the tools and the bench harness
// as subcommands. Flags and config files are read here only; libraries get plain values.
//
// Exit status, the same for every subcommand: 0 success (and for -help, which prints the
// usage to stdout), 1 the command ran and failed (a broker unreachable or answering an
// error, a corrupt log found by `segment verify`, records not acknowledged), 2 a usage
// error (bad flags or arguments), after which the usage is printed. A command group
// (`sluice topic -help`, `sluice segment -help`, ...) prints its subcommands.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand: run gets the arguments after its name. An error is a
// failure (exit 1) unless it is a usageError (exit 2) or a helpError (exit 0).
type command struct {
	usage string
	run   func(args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"admin":          {"admin -zk ADDRS [-zk-root PATH] [-id NAME]: stand by for, then run, the leader that places partitions on brokers (distributed mode)", runAdmin},
		"chaos":          {"chaos [--duration D] [--faults F,...] [--seed N] [--distributed] [--json FILE]: inject faults under load into brokers on loopback, then check that nothing acknowledged was lost, duplicated or reordered", chaosCmd},
		"cluster status": {"cluster status -zk ADDRS [-zk-root PATH]: print a distributed cluster's brokers and every partition's owner", clusterStatus},
		"broker":         {"broker -data DIR [-listen ADDR] [-config FILE] [-arena-size SIZE] [-metrics ADDR]: run the embedded broker", runBroker},
		"produce":        {"produce --broker ADDR --topic T [--key] [--acks accepted|persisted] [--codec C] [--timeout D]: send stdin lines as records (lines end at \\n or \\r\\n: one \\r before the \\n is dropped)", produce},
		"consume":        {"consume --broker ADDR --topic T [--from oldest|newest|OFFSET|RFC3339] [--positions P=OFFSET,...] [--max N] [--idle D] [--logical A-B] [--timeout D]: print record values", consume},
		"topic create":   {"topic create NAME --partitions N --broker ADDR: create a topic", topicCreate},
		"topic describe": {"topic describe NAME --broker ADDR: print a topic's partitions, offsets and checkpoints", topicDescribe},
		"user add":       {"user add NAME [--file USERS | --zk ADDRS [--zk-root R]] [--password-file F] [--iterations N] [--replace]: add a user to the users file or znode (password: first line of stdin or of F)", userAdd},
		"user remove":    {"user remove NAME [--file USERS | --zk ADDRS [--zk-root R]]: remove a user from the users file or znode", userRemove},
		"user list":      {"user list [--file USERS | --zk ADDRS [--zk-root R]]: print the users of the users file or znode", userList},
		"user import":    {"user import USERS --zk ADDRS [--zk-root R]: replace the cluster's users znode with a users file's users", userImport},
		"acl import":     {"acl import ACLS --zk ADDRS [--zk-root R]: replace the cluster's ACL znode with an ACL file's grants", aclImport},
		"acl add":        {"acl add --user U (--topic T | --prefix P | --all) --ops produce,consume,... [--file ACLS | --zk ADDRS [--zk-root R]]: grant operations", aclAdd},
		"acl remove":     {"acl remove --user U (--topic T | --prefix P | --all) [--ops ...] [--file ACLS | --zk ADDRS [--zk-root R]]: take operations back (all without --ops)", aclRemove},
		"acl list":       {"acl list [--user U] [--file ACLS | --zk ADDRS [--zk-root R]]: print the grants", aclList},
		"topic expand": {"topic expand NAME --partitions N --broker ADDR: raise a topic's partition count online (distributed mode), wait until placed and switched",
			topicExpand},
		"tune":           {"tune [-data DIR]: print the broker settings this host calls for (a config file, with reasons) and host advice", tuneHost},
		"segment dump":   {"segment dump DIR: print every batch of a partition directory", segmentDump},
		"segment verify": {"segment verify DIR: check CRCs, offsets and indexes; tell a torn tail from damage; exit 1 on a problem (for a stopped broker's directory: a live partition's last segment may show a torn tail)", segmentVerify},
		"segment repair": {"segment repair DIR --truncate-at OFFSET [--dry-run]: cut a damaged partition (broker stopped)", segmentRepair},
		"segment demo":   {"segment demo DIR [-batches N]: write a small demo log", segmentDemo},
		"bench produce":  {"bench produce [-system S] [-broker ADDR] [flags]: measure producers", benchCmd("produce")},
		"bench consume":  {"bench consume [-system S] [-broker ADDR] [-from start|tail] [flags]: measure consumers", benchCmd("consume")},
		"bench e2e":      {"bench e2e [-system S] [-broker ADDR] [-rate R] [flags]: end-to-end latency", benchCmd("e2e")},
		"bench relay":    {"bench relay [-listen ADDR]: serve the end-to-end latency ceiling (bench e2e -system relay)", benchRelay},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches args to a subcommand and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmds := commands()
	for n := min(2, len(args)); n > 0; n-- {
		c, ok := cmds[strings.Join(args[:n], " ")]
		if !ok {
			continue
		}
		err := c.run(args[n:], stdin, stdout, stderr)
		var ue usageError
		var he helpError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &he):
			fmt.Fprintf(stdout, "usage: sluice %s\n\nflags:\n", c.usage)
			he.fs.SetOutput(stdout)
			he.fs.PrintDefaults()
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "sluice: %v\nusage: sluice %s\n", err, c.usage)
			return 2
		default:
			fmt.Fprintf(stderr, "sluice: %v\n", err)
			return 1
		}
	}
	if len(args) == 1 && isHelp(args[0]) {
		printUsage(stdout, cmds)
		return 0
	}
	// A command group (topic, segment, user, bench, ...) without a subcommand of its own:
	// -help prints the group's subcommands (exit 0); none or an unknown one is a usage
	// error, with the group's subcommands.
	if len(args) > 0 {
		if group := groupCommands(cmds, args[0]); len(group) > 0 {
			if len(args) == 2 && isHelp(args[1]) {
				printGroupUsage(stdout, args[0], group)
				return 0
			}
			if len(args) == 1 {
				fmt.Fprintf(stderr, "sluice: %s needs a subcommand\n", args[0])
			} else {
				fmt.Fprintf(stderr, "sluice: unknown subcommand %s %s\n", args[0], args[1])
			}
			printGroupUsage(stderr, args[0], group)
			return 2
		}
	}
	printUsage(stderr, cmds)
	return 2
}

// isHelp tells whether arg asks for the usage.
func isHelp(arg string) bool {
	return arg == "-help" || arg == "--help" || arg == "-h" || arg == "help"
}

// groupCommands returns the commands of the group name ("topic" for "topic create", ...),
// none when name is not a group.
func groupCommands(cmds map[string]command, name string) map[string]command {
	group := map[string]command{}
	for n, c := range cmds {
		if strings.HasPrefix(n, name+" ") {
			group[n] = c
		}
	}
	return group
}

// printGroupUsage prints the subcommands of the group name.
func printGroupUsage(w io.Writer, name string, group map[string]command) {
	fmt.Fprintf(w, "usage: sluice %s SUBCOMMAND [ARGS]\n\nsubcommands:\n", name)
	printCommands(w, group)
	fmt.Fprintf(w, "\n`sluice %s SUBCOMMAND -help` prints a subcommand's flags.\n", name)
}

func printUsage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: sluice COMMAND [ARGS]\n\ncommands:")
	printCommands(w, cmds)
}

// printCommands prints the usage line of each of cmds, sorted by name.
func printCommands(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for name := range cmds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %s\n", cmds[name].usage)
	}
}
