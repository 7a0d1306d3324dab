package chaos

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is one kind of failure the proxy injects.
type Fault string

// The faults of FaultProxy. Each names what the client sees.
const (
	// FaultProvisioned answers HTTP 400 ProvisionedThroughputExceededException without forwarding.
	FaultProvisioned Fault = "provisioned-throughput-exceeded"
	// FaultThrottling answers HTTP 400 ThrottlingException without forwarding.
	FaultThrottling Fault = "throttling"
	// FaultServerError answers HTTP 500 InternalServerError without forwarding.
	FaultServerError Fault = "http-500"
	// FaultReset closes the connection without forwarding (a connection reset).
	FaultReset Fault = "connection-reset"
	// FaultLostResponse forwards the request (the write happens) and then closes the connection
	// instead of answering: the client never learns the outcome.
	FaultLostResponse Fault = "lost-response"
	// FaultDelay forwards the request and holds the response for Rates.Delay, past the client's
	// timeouts: a write that succeeds on the server while the client has given up.
	FaultDelay Fault = "delayed-response"
)

// AllFaults lists every fault, in a stable order.
var AllFaults = []Fault{FaultProvisioned, FaultThrottling, FaultServerError, FaultReset, FaultLostResponse, FaultDelay}

// Rates are the share of requests (0..1) that get each fault; the rest pass through untouched.
type Rates struct {
	Faults map[Fault]float64
	// Delay is how long FaultDelay holds a response. Defaults to 3s.
	Delay time.Duration
}

// FaultProxy is a reverse proxy on 127.0.0.1 in front of DynamoDB (its JSON protocol) that injects
// faults into a seeded random share of requests. Counts says what it did.
type FaultProxy struct {
	upstream string
	rates    Rates
	enabled  atomic.Bool
	observe  atomic.Pointer[func(Exchange)]

	cutMu  sync.Mutex
	cut    bool
	healed chan struct{} // closed when the cut ends (see Cut)

	mu     sync.Mutex
	rng    *rand.Rand
	counts map[string]int // "<fault> <operation>" -> n; "pass <operation>" too

	ln     net.Listener
	srv    *http.Server
	client *http.Client
	tr     *http.Transport
	wg     sync.WaitGroup
	stop   chan struct{}
}

// StartProxy starts a proxy to upstream (e.g. http://127.0.0.1:8000). Faults are on at once;
// SetEnabled(false) lets everything through.
func StartProxy(upstream string, seed uint64, rates Rates) (*FaultProxy, error) {
	if rates.Delay <= 0 {
		rates.Delay = 3 * time.Second
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: proxy listen: %w", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 10 * time.Second}
	p := &FaultProxy{
		upstream: strings.TrimRight(upstream, "/"),
		rates:    rates,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		counts:   map[string]int{},
		ln:       ln,
		tr:       tr,
		client:   &http.Client{Transport: tr},
		stop:     make(chan struct{}),
	}
	p.enabled.Store(true)
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// Exchange is one forwarded request and its answer, for Observe.
type Exchange struct {
	Op string
	// Attempt is the SDK's attempt number of the request (its amz-sdk-request header): above 1,
	// a retry of a request whose earlier attempt failed, perhaps while the client was cut off.
	Attempt string
	Req     []byte
	Status  int
	Resp    []byte
}

// Observe calls fn (from the request's goroutine) for every request forwarded without a fault,
// with the answer DynamoDB gave; nil stops observing.
func (p *FaultProxy) Observe(fn func(Exchange)) {
	if fn == nil {
		p.observe.Store(nil)
		return
	}
	p.observe.Store(&fn)
}

// Cut cuts the clients off DynamoDB (on) or reconnects them (off). While cut, every request is
// held, never forwarded, and its connection reset when the cut ends or the client gives up: a
// network partition, as the client sees one. Such requests count as "cut <operation>".
func (p *FaultProxy) Cut(on bool) {
	p.cutMu.Lock()
	defer p.cutMu.Unlock()
	if on == p.cut {
		return
	}
	p.cut = on
	if on {
		p.healed = make(chan struct{})
	} else {
		close(p.healed)
	}
}

// whileCut holds a request that arrives during a cut until the cut ends; it reports whether the
// request was held (and must not be forwarded).
func (p *FaultProxy) whileCut(r *http.Request, op string) bool {
	p.cutMu.Lock()
	cut, healed := p.cut, p.healed
	if cut {
		p.mu.Lock()
		p.counts["cut "+op]++
		p.mu.Unlock()
	}
	p.cutMu.Unlock()
	if !cut {
		return false
	}
	select {
	case <-healed:
	case <-r.Context().Done():
	case <-p.stop:
	}
	return true
}

// URL is the proxy's endpoint for clients.
func (p *FaultProxy) URL() string { return "http://" + p.ln.Addr().String() }

// SetEnabled turns fault injection on or off.
func (p *FaultProxy) SetEnabled(on bool) { p.enabled.Store(on) }

// Close stops the proxy, cutting held responses short, and waits for its goroutines.
func (p *FaultProxy) Close() error {
	close(p.stop)
	err := p.srv.Close()
	p.wg.Wait()
	p.tr.CloseIdleConnections()
	return err
}

// Counts returns how many requests got each fault (and passed) per DynamoDB operation.
func (p *FaultProxy) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// Injected is the number of requests that got a fault.
func (p *FaultProxy) Injected() int {
	n := 0
	for k, v := range p.Counts() {
		if !strings.HasPrefix(k, "pass ") {
			n += v
		}
	}
	return n
}

func (p *FaultProxy) pick(op string) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	var f Fault
	if p.enabled.Load() {
		x := p.rng.Float64()
		for _, c := range AllFaults {
			r := p.rates.Faults[c]
			if x < r {
				f = c
				break
			}
			x -= r
		}
	}
	if f == "" {
		p.counts["pass "+op]++
	} else {
		p.counts[string(f)+" "+op]++
	}
	return f
}

// operation is the DynamoDB operation of a JSON-protocol request (X-Amz-Target
// DynamoDB_20120810.UpdateItem).
func operation(r *http.Request) string {
	t := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		return t[i+1:]
	}
	return "unknown"
}

func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := operation(r)
	if p.whileCut(r, op) {
		resetConn(w)
		return
	}
	f := p.pick(op)
	switch f {
	case FaultProvisioned:
		writeError(w, http.StatusBadRequest, "ProvisionedThroughputExceededException",
			"The level of configured provisioned throughput for the table was exceeded (chaos)")
		return
	case FaultThrottling:
		writeError(w, http.StatusBadRequest, "ThrottlingException", "Rate of requests exceeds the allowed throughput (chaos)")
		return
	case FaultServerError:
		writeError(w, http.StatusInternalServerError, "InternalServerError", "Internal server error (chaos)")
		return
	case FaultReset:
		resetConn(w)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		resetConn(w)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	out.Header = r.Header.Clone()
	out.Host = ""
	resp, err := p.client.Do(out)
	if err != nil {
		// Upstream down (a restart scenario) looks like a reset to the client.
		resetConn(w)
		return
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		resetConn(w)
		return
	}
	switch f {
	case FaultLostResponse:
		resetConn(w)
		return
	case FaultDelay:
		select {
		case <-time.After(p.rates.Delay):
		case <-r.Context().Done(): // the client gave up: its write happened all the same
			return
		case <-p.stop:
			return
		}
	}
	if fn := p.observe.Load(); fn != nil && f == "" {
		(*fn)(Exchange{Op: op, Attempt: sdkAttempt(r), Req: body, Status: resp.StatusCode, Resp: respBody})
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(respBody)
}

// sdkAttempt reads "attempt=N" from the amz-sdk-request header ("" without one).
func sdkAttempt(r *http.Request) string {
	for _, part := range strings.Split(r.Header.Get("Amz-Sdk-Request"), ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "attempt="); ok {
			return v
		}
	}
	return ""
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Requestid", "chaos")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, typ, msg)
}

// resetConn closes the client's connection with an RST (SO_LINGER 0), mid-exchange.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
