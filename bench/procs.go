package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sluice/internal/spawn"
)

// Server is a server process the suite starts, restarts and stops, always by its pid.
// It is used by one goroutine.
type Server struct {
	Name string
	Addr string // host:port it serves on, 127.0.0.1 only
	Dir  string // data directory, kept across restarts
	// argv builds the command line; ready waits until the server serves.
	argv  func() []string
	ready func(ctx context.Context, s *Server) error
	cmd   *exec.Cmd
	log   *os.File
	// MetricsAddr is the server's Prometheus endpoint (host:port), where it has one.
	MetricsAddr string
	// PeakRSS is the largest VmHWM seen over the server's processes, in bytes.
	PeakRSS int64
}

// Start runs the server and waits (up to 2 minutes) until it serves.
func (s *Server) Start(ctx context.Context) error {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	lf, err := os.OpenFile(filepath.Join(s.Dir, "..", s.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	argv := s.argv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	// If the suite dies, the kernel kills the server it started (spawn.Start).
	if err := spawn.Start(cmd); err != nil {
		lf.Close()
		return fmt.Errorf("cannot start %s: %w", s.Name, err)
	}
	s.cmd, s.log = cmd, lf
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := s.ready(rctx, s); err != nil {
		s.Stop()
		return fmt.Errorf("%s did not become ready (log %s): %w", s.Name, lf.Name(), err)
	}
	return nil
}

// Pid returns the running process's id, 0 if none.
func (s *Server) Pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// SampleRSS updates PeakRSS from the process's VmHWM.
func (s *Server) SampleRSS() {
	if pid := s.Pid(); pid > 0 {
		s.PeakRSS = max(s.PeakRSS, procStatusBytes(pid, "VmHWM:"))
	}
}

// Stop sends SIGTERM to the server's pid, waits up to 30 s, then SIGKILLs it.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
	}
	s.SampleRSS()
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		err = <-done
	}
	s.cmd = nil
	s.log.Close()
	return err
}

// Restart stops and starts the server on the same data directory: its memory is cold,
// the page cache is not.
func (s *Server) Restart(ctx context.Context) error {
	s.Stop()
	return s.Start(ctx)
}

// procStatusBytes returns a "kB" field of /proc/PID/status in bytes, 0 if unknown.
func procStatusBytes(pid int, field string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// waitPort polls until addr accepts a TCP connection.
func waitPort(ctx context.Context, addr string) error {
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitFile polls until path exists and is not empty.
func waitFile(ctx context.Context, path string) error {
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no %s", path)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// SluiceServer is `sluice broker` with the given fsync policy, a 4 GiB arena faulted in
// at start (arena.prefault, as a dedicated host would run it: no first-touch faults on
// the produce path), retention checked every 2 s (so sustained runs keep to their
// retention) and its metrics on a free loopback port (MetricsAddr, read from the ready
// file).
func SluiceServer(bin, dir, addr, fsync string) *Server {
	s := &Server{Name: "sluice", Addr: addr, Dir: dir}
	ready := filepath.Join(dir, "..", "sluice.ready")
	s.argv = func() []string {
		os.Remove(ready)
		return []string{bin, "broker", "-data", dir, "-listen", addr, "-ready-file", ready,
			"-log.fsync", fsync, "-arena-size", "4GiB", "-arena.prefault", "true",
			"-broker.retention_check", "2s", "-metrics", "127.0.0.1:0"}
	}
	s.ready = func(ctx context.Context, s *Server) error {
		if err := waitFile(ctx, ready); err != nil {
			return err
		}
		b, err := os.ReadFile(ready)
		if err != nil {
			return err
		}
		// The ready file: the broker's address, then the metrics address.
		if f := strings.Fields(string(b)); len(f) >= 2 {
			s.MetricsAddr = f[1]
		}
		return waitPrefaulted(ctx, s.MetricsAddr)
	}
	return s
}

// RelayServer is `sluice bench relay`, the end-to-end latency ceiling (relay.go); dir
// holds only its log.
func RelayServer(bin, dir, addr string) *Server {
	return &Server{Name: "relay", Addr: addr, Dir: dir,
		argv:  func() []string { return []string{bin, "bench", "relay", "-listen", addr} },
		ready: func(ctx context.Context, s *Server) error { return waitPort(ctx, addr) }}
}

// waitPrefaulted waits (at most two minutes) until the broker at metrics address addr
// has faulted in its whole arena: runs measure the broker as a dedicated host runs it
// once started, not the prefault goroutine taking a core for its first seconds (what
// prefault costs at start is measured apart: docs/memarena.md).
func waitPrefaulted(ctx context.Context, addr string) error {
	const size, done = `sluice_arena_bytes{kind="size"}`, `sluice_arena_bytes{kind="prefaulted"}`
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		m, err := ScrapeCounters(ctx, addr, size, done)
		if err == nil && m[size] > 0 && m[done] >= m[size] {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the broker's arena was not prefaulted in time (%v): %w", m, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// NATSServer is nats-server with JetStream's file store; syncAlways sets
// `sync_interval: always` (otherwise the default, an fsync every 2 minutes).
func NATSServer(bin, dir, addr string, syncAlways bool) *Server {
	s := &Server{Name: "nats", Addr: addr, Dir: dir}
	conf := filepath.Join(dir, "..", "nats.conf")
	s.argv = func() []string {
		sync := ""
		if syncAlways {
			sync = "\n  sync_interval: always"
		}
		c := fmt.Sprintf("listen: %s\nhttp: 0\njetstream {\n  store_dir: %q\n  max_memory_store: 1GB\n  max_file_store: 64GB%s\n}\n", addr, dir, sync)
		os.WriteFile(conf, []byte(c), 0o644)
		return []string{bin, "-c", conf}
	}
	s.ready = func(ctx context.Context, s *Server) error { return waitPort(ctx, s.Addr) }
	return s
}

// KafkaServer is a single-node KRaft Kafka from the jars in kafkaDir/lib, heap 1 GiB,
// listening on addr (PLAINTEXT) and addr's port + 1 (CONTROLLER), both on 127.0.0.1.
// The storage is formatted on the first start. Settings as scripts/bench-kafka.
func KafkaServer(kafkaDir, dir, addr string) *Server {
	s := &Server{Name: "kafka", Addr: addr, Dir: dir}
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	ctrl := net.JoinHostPort(host, strconv.Itoa(p+1))
	props := filepath.Join(dir, "..", "server.properties")
	log4j := filepath.Join(kafkaDir, "log4j2.properties")
	java := func(heap string, args ...string) []string {
		return append([]string{"java", "-Xms" + heap, "-Xmx" + heap, "-XX:+UseG1GC", "-Djava.awt.headless=true",
			"-Dlog4j2.configurationFile=" + log4j, "-cp", filepath.Join(kafkaDir, "lib") + "/*"}, args...)
	}
	s.argv = func() []string {
		c := strings.Join([]string{
			"process.roles=broker,controller", "node.id=1",
			"controller.quorum.voters=1@" + ctrl,
			"listeners=PLAINTEXT://" + addr + ",CONTROLLER://" + ctrl,
			"advertised.listeners=PLAINTEXT://" + addr,
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"controller.listener.names=CONTROLLER", "inter.broker.listener.name=PLAINTEXT",
			"log.dirs=" + dir,
			"offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
			"transaction.state.log.min.isr=1", "share.coordinator.state.topic.replication.factor=1",
			"share.coordinator.state.topic.min.isr=1", "group.initial.rebalance.delay.ms=0",
			"num.partitions=1", "log.segment.bytes=1073741824",
			// Topics with retention.bytes (the sustained runs) are trimmed within 5 s
			// (default 5 minutes); topics without it are not affected.
			"log.retention.check.interval.ms=5000",
		}, "\n") + "\n"
		os.WriteFile(props, []byte(c), 0o644)
		if _, err := os.Stat(filepath.Join(dir, "meta.properties")); err != nil {
			format := java("256m", "kafka.tools.StorageTool", "format", "-t", "dZpImRuWRg-hA75HKIIHcw", "-c", props)
			if out, err := exec.Command(format[0], format[1:]...).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "kafka storage format: %v\n%s\n", err, out)
			}
		}
		return java("1g", "kafka.Kafka", props)
	}
	s.ready = func(ctx context.Context, s *Server) error {
		if err := waitPort(ctx, s.Addr); err != nil {
			return err
		}
		return KafkaReady(ctx, s.Addr)
	}
	return s
}
