package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
)

// stepServers are the pipeline's steps: echo servers on loopback addresses, in this process.
type stepServers struct {
	urls    []string
	servers []*http.Server
}

// echo answers the JSON body it is sent, as a model server that transforms its input in place
// would, without the model's time.
func echo(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func startSteps(n int) (*stepServers, error) {
	s := &stepServers{}
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.close()
			return nil, err
		}
		srv := &http.Server{Handler: http.HandlerFunc(echo)}
		go func() { _ = srv.Serve(ln) }()
		s.servers = append(s.servers, srv)
		s.urls = append(s.urls, "http://"+ln.Addr().String()+"/infer")
	}
	return s, nil
}

func (s *stepServers) close() {
	for _, srv := range s.servers {
		_ = srv.Close()
	}
}

// requestBody is a JSON document of about size bytes: {"items": ["xxxx", ...]}.
func requestBody(size int) []byte {
	var items []string
	for n := 12; n < size; n += 67 {
		items = append(items, strings.Repeat("x", 64))
	}
	b, _ := json.Marshal(map[string][]string{"items": items})
	return b
}
