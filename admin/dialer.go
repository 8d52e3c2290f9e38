package admin

import (
	"net"
	"time"

	"github.com/go-zookeeper/zk"
)

// A handshake that gets no answer. go-zookeeper gives the answer to its connect
// request ten receive timeouts (6.7 session timeouts: 40 s at the default 6 s) before it
// tries again. A ZooKeeper server that is starting takes connections while it loads its
// database, refuses them, and its close of the refused connection fails
// (ZOOKEEPER-5051): the connection stays open and nothing answers on it. A broker that
// reconnected in that moment waited far past its session, which the started server
// expired (TestClusterZooKeeperRestarted: a restart of a few seconds cost both brokers
// their sessions and every partition). So the handshake's deadlines are cut to a third
// of the session timeout: one that gets no answer is given up and tried again while
// the session lives. The deadlines of an established connection (one receive timeout,
// two thirds of the session) are left as they are. The session is the one ZooKeeper
// granted once known: go-zookeeper's receive timeout follows it, and a server whose
// minSessionTimeout is above what was asked grants more (with the asked timeout the
// receive deadlines were cut too, below the ping interval, and an idle connection was
// dropped every time: TestDialerGrantedAboveAsked).

// handshakeDialer returns go-zookeeper's dialer with the handshake's deadlines capped
// at a third of session(): the session timeout granted, or asked until granted.
func handshakeDialer(session func() time.Duration) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &cappedConn{Conn: c, session: session}, nil
	}
}

// cappedConn cuts any deadline set further ahead than the session timeout (an
// established connection's are its receive timeout, two thirds of it) to a third of
// the session from now.
type cappedConn struct {
	net.Conn
	session func() time.Duration
}

func (c *cappedConn) cap(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	now, s := time.Now(), c.session()
	if t.Sub(now) > s {
		return now.Add(s / 3)
	}
	return t
}

// SetDeadline sets both deadlines, capped.
func (c *cappedConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.cap(t)) }

// SetReadDeadline sets the read deadline, capped.
func (c *cappedConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.cap(t)) }

// SetWriteDeadline sets the write deadline, capped.
func (c *cappedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.cap(t)) }
