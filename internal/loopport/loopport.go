// Package loopport picks loopback ports for servers that must get their port back after a
// restart: a broker killed and started again, a ZooKeeper or a NameNode restarted by a
// test or by the chaos harness.
//
// A port the kernel hands out for "127.0.0.1:0" comes from its ephemeral range, the same
// range every outgoing connection on the host takes its local port from. Once the server
// on it stops, any connection opened on the host (a parallel test's client, a JVM's RPC)
// may take that port before the server is started again, which then cannot bind. Free
// picks below that range instead, where only listeners that ask for a port by number
// bind.
package loopport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the first port Free picks from: above the ports well-known services listen on
// (ZooKeeper's 2181, Kafka's 9092, Hadoop's 8020 and 9870 and their kin).
const lowest = 20000

// tries bounds the random picks that Free binds before it falls back to the ephemeral
// range.
const tries = 64

// rangeFile holds the kernel's ephemeral port range, "low high".
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Free returns a loopback TCP port that was free a moment ago: a random one between 20000
// and the start of the kernel's ephemeral range when that range starts high enough, else
// one from the ephemeral range (as "127.0.0.1:0" gives). The caller binds it later, so
// another process that asks for the same number in between can still take it; a caller
// that can pick again when its first bind fails should.
func Free() (int, error) {
	if lo, err := ephemeralLow(); err == nil && lo > lowest+1000 {
		for range tries {
			port := lowest + rand.IntN(lo-lowest)
			if free(port) {
				return port, nil
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("loopport: no free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Addr returns "127.0.0.1:port" for a port Free picks.
func Addr() (string, error) {
	port, err := Free()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// free reports whether a listener can bind port on loopback now.
func free(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// ephemeralLow reads the first port of the kernel's ephemeral range.
func ephemeralLow() (int, error) {
	raw, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(raw))
	if len(f) != 2 {
		return 0, errors.New("loopport: unexpected " + rangeFile)
	}
	return strconv.Atoi(f[0])
}
