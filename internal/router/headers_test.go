package router

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
	"github.com/ndsl-cn/pipeline-operator/internal/router/stepclient"
)

func TestNewRequestIDIsAVersion4UUID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := newRequestID()
		if !re.MatchString(id) {
			t.Fatalf("%q is not a version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("%q generated twice", id)
		}
		seen[id] = true
	}
}

func TestRouterSendsItsUserAgentUnlessTheCallersIsPassedOn(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	s := newStep(t, func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("User-Agent"))
	})
	plain := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: s.URL}}})
	passing := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: s.URL}}, PropagateHeaders: []string{"user-agent"}})
	caller := http.Header{"User-Agent": {"face-client/2"}}
	for _, url := range []string{plain.url, passing.url} {
		if a := post(t, url, "text/plain", "in", caller); a.status != http.StatusOK {
			t.Fatalf("answer %d %q", a.status, a.body)
		}
	}
	if a := post(t, passing.url, "text/plain", "in", http.Header{"User-Agent": {""}}); a.status != http.StatusOK {
		t.Fatalf("answer %d %q", a.status, a.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"pipeline-router", "face-client/2", "pipeline-router"}; !slices.Equal(got, want) {
		t.Errorf("the step saw User-Agent %q, want %q", got, want)
	}
}

func TestValidRequestID(t *testing.T) {
	for id, want := range map[string]bool{
		"req-42":                               true,
		"0f6c3a52-6a7e-4b8e-9d3c-2f1e8b7a5c41": true,
		"01HZX3KQ7M2V9C8R5T4N6B1YWE":           true,
		"host-7.example:1234_a":                true,
		strings.Repeat("a", 128):               true,
		"":                                     false,
		strings.Repeat("a", 129):               false,
		"with space":                           false,
		"<script>":                             false,
		`"quoted"`:                             false,
		"a/b":                                  false,
		"a;b=c":                                false,
		"a\tb":                                 false,
		"a\x00b":                               false,
		"a\x7fb":                               false,
		"caf\u00e9":                            false,
		"a,b":                                  false,
	} {
		if got := validRequestID(id); got != want {
			t.Errorf("validRequestID(%q) = %v, want %v", id, got, want)
		}
	}
}

// The router keeps a caller's X-Request-Id only in a safe form: it goes back in the answer's
// header and error body and on to every step. Any other gets a new id in its place, the same
// everywhere.
func TestRouterKeepsOnlyASafeRequestID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	var (
		mu   sync.Mutex
		seen []string
	)
	s := newStep(t, func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Header.Values(config.HeaderRequestID)...)
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: s.URL}}})
	for _, tc := range []struct {
		name string
		sent []string
		keep bool
	}{
		{name: "a UUID", sent: []string{"0f6c3a52-6a7e-4b8e-9d3c-2f1e8b7a5c41"}, keep: true},
		{name: "letters, digits and ._:-", sent: []string{"edge-7.cam_2:000123"}, keep: true},
		{name: "the longest kept", sent: []string{strings.Repeat("r", 128)}, keep: true},
		{name: "none", sent: nil},
		{name: "empty", sent: []string{""}},
		{name: "too long", sent: []string{strings.Repeat("r", 129)}},
		{name: "markup", sent: []string{"<img src=x onerror=alert(1)>"}},
		{name: "a space and a quote", sent: []string{`req 42"`}},
		{name: "a log field", sent: []string{"42 level=ERROR msg=forged"}},
		{name: "not ASCII", sent: []string{"req-\u00e9"}},
		{name: "a second value after a bad first", sent: []string{"<bad>", "req-42"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			a := post(t, tr.url, "text/plain", "in", http.Header{config.HeaderRequestID: tc.sent})
			if a.status != http.StatusOK {
				t.Fatalf("answer %d %q", a.status, a.body)
			}
			got := a.header.Values(config.HeaderRequestID)
			if len(got) != 1 {
				t.Fatalf("the answer carries %s %q, want one value", config.HeaderRequestID, got)
			}
			if tc.keep && got[0] != tc.sent[0] {
				t.Errorf("the answer carries %s %q, want the caller's %q", config.HeaderRequestID, got[0], tc.sent[0])
			}
			if !tc.keep && !uuid.MatchString(got[0]) {
				t.Errorf("the answer carries %s %q, want a new UUID in place of %q", config.HeaderRequestID, got[0], tc.sent)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, got) {
				t.Errorf("the step saw %s %q, the caller %q", config.HeaderRequestID, seen, got)
			}
		})
	}

	// An error answer carries the same id in its body.
	req, err := http.NewRequest(http.MethodGet, tr.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(config.HeaderRequestID, "<bad>")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var e errorBody
	if err := json.NewDecoder(res.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if id := res.Header.Get(config.HeaderRequestID); res.StatusCode != http.StatusMethodNotAllowed || !uuid.MatchString(id) || e.RequestID != id {
		t.Errorf("answer %d with %s %q, body requestId %q; want 405 and one new UUID in both", res.StatusCode, config.HeaderRequestID, id, e.RequestID)
	}
}

// The operator names a step's Service by its absolute DNS name (with the trailing dot). The router
// asks DNS for that name alone and names the step in the Host header without the dot, as for the
// name without it, on its own connections (small bodies) as through net/http (large ones).
func TestRouterCallsAnAbsoluteNameWithTheDotOffTheHostHeader(t *testing.T) {
	const name = "p-one.team-a.svc.cluster.local."
	hosts := make(chan string, 2)
	s := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Host
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	_, port, err := net.SplitHostPort(s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	dns := newLoopbackDNS(t, name)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: "http://" + name + ":" + port + "/"}}})
	tr.client = stepclient.New((&net.Dialer{Resolver: dns.resolver()}).DialContext)
	for _, size := range []int{16, 1 << 20} {
		body := strings.Repeat("x", size)
		a := post(t, tr.url, "text/plain", body, nil)
		if a.status != http.StatusOK || a.body != body {
			t.Fatalf("%d bytes: answer %d of %d bytes: %.200s", size, a.status, len(a.body), a.body)
		}
		if got, want := <-hosts, strings.TrimSuffix(name, ".")+":"+port; got != want {
			t.Errorf("%d bytes: the step saw Host %q, want %q", size, got, want)
		}
	}
	for _, q := range dns.questions() {
		if q != name {
			t.Errorf("DNS was asked for %q; want only %q", q, name)
		}
	}
}

// loopbackDNS is a DNS server on 127.0.0.1 that answers name with 127.0.0.1 and records the
// names it is asked for.
type loopbackDNS struct {
	conn  net.PacketConn
	mu    sync.Mutex
	asked []string
}

func newLoopbackDNS(t *testing.T, name string) *loopbackDNS {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &loopbackDNS{conn: conn}
	t.Cleanup(func() { _ = conn.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			d.mu.Lock()
			d.asked = append(d.asked, q.Name.String())
			d.mu.Unlock()
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true,
				RCode: dnsmessage.RCodeSuccess})
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if q.Type == dnsmessage.TypeA && strings.EqualFold(q.Name.String(), name) {
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1},
					dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}})
			}
			out, err := b.Finish()
			if err == nil {
				_, _ = conn.WriteTo(out, from)
			}
		}
	}()
	return d
}

// resolver asks d whatever DNS server the system names: no query leaves the machine.
func (d *loopbackDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, "udp", d.conn.LocalAddr().String())
	}}
}

func (d *loopbackDNS) questions() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.asked)
}

func TestIsJSON(t *testing.T) {
	for contentType, want := range map[string]bool{
		"application/json":                true,
		"application/json; charset=utf-8": true,
		"Application/JSON":                true,
		"application/problem+json":        true,
		"application/vnd.api+json; x=1":   true,
		"application/jsonx":               false,
		"text/plain":                      false,
		"text/json; =":                    false,
		"":                                false,
	} {
		if got := isJSON(contentType); got != want {
			t.Errorf("isJSON(%q) = %v, want %v", contentType, got, want)
		}
	}
}

// The configuration names the Open Inference Protocol's body header without importing oip (the
// operator imports the configuration): it must be the same name.
func TestTheOpenInferenceBodyHeaderIsSetByTheRouter(t *testing.T) {
	if !config.FramingHeader(oip.HeaderInferenceHeaderLength) || config.CheckPropagatedHeader(oip.HeaderInferenceHeaderLength) == nil {
		t.Fatalf("%s is not among the headers the router sets itself", oip.HeaderInferenceHeaderLength)
	}
}

// Each call to a step names the step called, whatever the caller sent under that name.
func TestEachStepCallNamesItsStep(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	record := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, strings.Join(r.Header.Values(config.HeaderStep), ","))
		_, _ = w.Write([]byte("ok"))
	}
	one, two := newStep(t, record), newStep(t, record)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "detect", URL: one.URL}, {Name: "classify", URL: two.URL}}})
	if a := post(t, tr.url, "text/plain", "in", http.Header{config.HeaderStep: {"forged"}}); a.status != http.StatusOK {
		t.Fatalf("answer %d %q", a.status, a.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"detect", "classify"}; !slices.Equal(got, want) {
		t.Fatalf("X-Pipeline-Step of the calls = %q, want %q", got, want)
	}
}
