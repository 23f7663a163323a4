package daemon

// noteStream counts a request c carried to its end, cancelled by the client before its answer
// started or not, and closes c once its cancelled streams within cancelWindow pass
// cancelBudget (http2.go): within Go's own bound on rapid reset a connection may still have
// its streams started and cancelled as fast as it can send them, taking the daemon's cores
// from everyone else. A connection of a trusted proxy is never closed by it.
func (l *limitListener) noteStream(c *limitedConn, cancelled bool) {
	if !cancelled || c.group == "" {
		return
	}
	now := l.now()
	l.mu.Lock()
	if c.cancels == 0 || now.Sub(c.cancelsSince) >= cancelWindow {
		c.cancels, c.cancelsSince = 0, now
	}
	c.cancels++
	over := c.cancels > cancelBudget && !c.cancelCut
	if over {
		c.cancelCut = true
	}
	l.mu.Unlock()
	if !over {
		return
	}
	if l.log != nil {
		l.log.Debug("connection closed: too many streams cancelled before their answers", "client", c.group, "cancelled", cancelBudget+1, "within", cancelWindow)
	}
	c.Close()
}
