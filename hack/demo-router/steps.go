package main

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strings"
	"sync/atomic"
)

// A picture, for this demo, is text: every ":)" in it is a face.
type picture struct {
	Image  string `json:"image"`
	Pixels string `json:"pixels"`
}

// face is a face the detector found, and the recognizer named.
type face struct {
	Box        [4]int  `json:"box"`
	Name       string  `json:"name,omitempty"`
	Confidence float64 `json:"confidence,omitempty"`
}

type detection struct {
	Image string `json:"image"`
	Faces []face `json:"faces"`
}

// detector is the fake face detector: it answers the faces of the picture it is sent.
type detector struct{ calls atomic.Int32 }

func (d *detector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.calls.Add(1)
	var p picture
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, "the detector wants a JSON picture: "+err.Error(), http.StatusBadRequest)
		return
	}
	out := detection{Image: p.Image, Faces: []face{}}
	for i := 0; ; {
		j := strings.Index(p.Pixels[i:], ":)")
		if j < 0 {
			break
		}
		out.Faces = append(out.Faces, face{Box: [4]int{i + j, 0, 2, 1}})
		i += j + 2
	}
	writeJSON(w, out)
}

// recognizer is the fake face recognizer: it names every face the detector found.
type recognizer struct{ calls atomic.Int32 }

var gallery = []string{"alice", "bob", "carol", "dave"}

func (c *recognizer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.calls.Add(1)
	var d detection
	if err := json.NewDecoder(r.Body).Decode(&d); err != nil {
		http.Error(w, "the recognizer wants the detector's answer: "+err.Error(), http.StatusBadRequest)
		return
	}
	for i := range d.Faces {
		h := fnv.New32a()
		_, _ = h.Write([]byte(d.Image))
		_, _ = h.Write([]byte{byte(d.Faces[i].Box[0])})
		d.Faces[i].Name = gallery[h.Sum32()%uint32(len(gallery))]
		d.Faces[i].Confidence = 0.9 + float64(h.Sum32()%10)/100
	}
	writeJSON(w, d)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
