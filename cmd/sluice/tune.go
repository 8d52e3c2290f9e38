package main

import (
	"flag"
	"io"

	"sluice/tools/tune"
)

// tuneHost prints the broker settings this host calls for, as a config file with the
// reason for each, and the host changes it advises (file limits, huge pages, dirty
// pages): `sluice tune -data /srv/sluice > /etc/sluice/sluice.conf`. It takes no
// positional arguments (a usage error, exit 2).
func tuneHost(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("tune", flag.ContinueOnError)
	data := fs.String("data", "/var/lib/sluice", "the data directory the broker will use (its disk is measured)")
	if err := noPositional(fs, args); err != nil {
		return err
	}
	h, err := tune.Inspect(*data)
	if err != nil {
		return err
	}
	s, a := tune.Recommend(h)
	return tune.Write(stdout, h, s, a)
}
