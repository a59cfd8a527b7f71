package fleet

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/iopgw/iop/internal/slogx"
)

// connLimiter bounds connections on the node port before any byte is
// read: at most perSource concurrent connections from one IP address and
// at most total in all. A connection over a limit is closed at once (its
// descriptor freed), so a flood of idle connections cannot take the
// descriptors the public API needs. Non-TCP connections (in-process
// listeners) count toward total only.
type connLimiter struct {
	net.Listener
	perSource, total int
	log              *slogx.Sampled

	mu    sync.Mutex
	open  int
	bySrc map[string]int
}

func LimitConns(ln net.Listener, perSource, total int, log *slog.Logger) net.Listener {
	return &connLimiter{Listener: ln, perSource: perSource, total: total, bySrc: map[string]int{},
		log: slogx.NewSampled(log, time.Second)}
}

// Accept returns the next connection within the limits.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := ""
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			src = a.IP.String()
		}
		if l.admit(src) {
			return &limitedConn{Conn: c, l: l, src: src}, nil
		}
		_ = c.Close()
		l.log.Warn("node port connection refused: over the connection limit", "source", src, "per_source_limit", l.perSource, "total_limit", l.total)
	}
}

func (l *connLimiter) admit(src string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.total || src != "" && l.bySrc[src] >= l.perSource {
		return false
	}
	l.open++
	if src != "" {
		l.bySrc[src]++
	}
	return true
}

func (l *connLimiter) done(src string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if src != "" {
		if l.bySrc[src]--; l.bySrc[src] <= 0 {
			delete(l.bySrc, src)
		}
	}
}

type limitedConn struct {
	net.Conn
	l    *connLimiter
	src  string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.done(c.src) })
	return err
}
