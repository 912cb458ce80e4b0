package router

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// openIdleRequest sends the head of a POST that announces contentLength bytes of body and
// sends none of them. It returns once the router has started to read the body (it answers
// the request's Expect: 100-continue then); the connection stays open until the test ends.
func openIdleRequest(t *testing.T, url string, contentLength int64) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write([]byte("POST / HTTP/1.1\r\nHost: router\r\nContent-Type: text/plain\r\n" +
		"Expect: 100-continue\r\nContent-Length: " + strconv.FormatInt(contentLength, 10) + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("the router did not start reading the announced body: %q %v", line, err)
	}
	return c
}

// TestServerIdleBodiesDoNotHoldTheBudget opens four requests that announce a body of
// maxBodyBytes (64 MiB) and send nothing: they must not keep other callers out.
func TestServerIdleBodiesDoNotHoldTheBudget(t *testing.T) {
	step := appendStep(t, "|ok", "text/plain", nil)
	s := serveRouter(t, Config{Steps: []Step{{Name: "one", URL: step.URL}}}, 0)
	for range 4 {
		openIdleRequest(t, s.url, DefaultMaxBodyBytes)
	}
	if a := post(t, s.url, "text/plain", "hello", nil); a.status != http.StatusOK || a.body != "hello|ok" {
		t.Fatalf("another caller while four bodies are announced: %d %q, want 200", a.status, a.body)
	}
}
