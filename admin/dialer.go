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
// two thirds of the session) are left as they are.

// handshakeDialer returns go-zookeeper's dialer with the handshake's deadlines capped
// at a third of sessionTimeout.
func handshakeDialer(sessionTimeout time.Duration) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &cappedConn{Conn: c, normal: sessionTimeout * 2 / 3, handshake: sessionTimeout / 3}, nil
	}
}

// cappedConn cuts any deadline set further ahead than an established connection's
// (normal, go-zookeeper's receive timeout, with room to spare) to handshake from now.
type cappedConn struct {
	net.Conn
	normal, handshake time.Duration
}

func (c *cappedConn) cap(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	now := time.Now()
	if t.Sub(now) > c.normal*3/2 {
		return now.Add(c.handshake)
	}
	return t
}

// SetDeadline sets both deadlines, capped.
func (c *cappedConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.cap(t)) }

// SetReadDeadline sets the read deadline, capped.
func (c *cappedConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.cap(t)) }

// SetWriteDeadline sets the write deadline, capped.
func (c *cappedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.cap(t)) }
