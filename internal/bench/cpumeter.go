package bench

import "time"

// cpuMeter reads the CPU time this process (the client: the library variants and hand loops run
// in it) and DynamoDB Local's process used between start and the reading, per item.
type cpuMeter struct {
	server         int // DynamoDB Local's process; 0: not found, only the client is read
	client0, srv0  time.Duration
	serverReadable bool
}

// serverPID is DynamoDB Local's process: e.ServerPID, or the one listening on the endpoint's port
// (0 when none is found).
func (e *Env) serverPID() int {
	if e.ServerPID != 0 {
		return e.ServerPID
	}
	return listenerPID(e.Endpoint)
}

// start begins a reading of the CPU time of this process and of DynamoDB Local's process pid.
func startCPU(pid int) *cpuMeter {
	m := &cpuMeter{server: pid, client0: selfCPU()}
	if pid != 0 {
		s, err := procCPU(pid)
		m.srv0, m.serverReadable = s, err == nil
	}
	return m
}

// perItem is each process's CPU time since start, µs per item of n; server is false when
// DynamoDB Local's process was not found or could not be read.
func (m *cpuMeter) perItem(n int) (client, server float64, ok bool) {
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	client = us(selfCPU() - m.client0)
	if !m.serverReadable {
		return client, 0, false
	}
	s, err := procCPU(m.server)
	if err != nil {
		return client, 0, false
	}
	return client, us(s - m.srv0), true
}

// CPUPerItem is CPU time per item, µs, one value per repetition (or block): this process's (the
// client's) and DynamoDB Local's (empty when its process was not found).
type CPUPerItem struct {
	Client, Server Sample
}

// add records one reading of m over n items.
func (c *CPUPerItem) add(m *cpuMeter, n int) {
	client, server, ok := m.perItem(n)
	c.Client = append(c.Client, client)
	if ok {
		c.Server = append(c.Server, server)
	}
}

// Fmt is "client / DynamoDB Local" µs per item, medians ("412 / 668"; "412 / –" without the server).
func (c CPUPerItem) Fmt() string {
	server := "–"
	if len(c.Server) > 0 {
		server = num(c.Server.Median(), 0)
	}
	return num(c.Client.Median(), 0) + " / " + server
}

// last is the last reading, as Fmt.
func (c CPUPerItem) last() string {
	return CPUPerItem{Client: c.Client[len(c.Client)-1:], Server: c.Server[max(len(c.Server)-1, 0):]}.Fmt()
}
