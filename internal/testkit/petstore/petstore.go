// Package petstore is a small implementation of the Swagger Petstore API
// (testdata/openapi/petstore3.yaml) for tests of REST execution: a real
// HTTP server on loopback that keeps pets, users and orders in memory,
// requires an API key, paginates findPetsByStatus with a Link header, and
// has a few operations that misbehave on request (slow, disconnecting,
// oversized, failing) so that the refusals and failures can be seen.
package petstore

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Pet is the spec's Pet.
type Pet struct {
	ID        int64    `json:"id"`
	Name      string   `json:"name"`
	Category  *Named   `json:"category,omitempty"`
	PhotoURLs []string `json:"photoUrls"`
	Tags      []Named  `json:"tags,omitempty"`
	Status    string   `json:"status,omitempty"`
}

// Named is the spec's Category and Tag.
type Named struct {
	ID   int64  `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// Request is one request the server received.
type Request struct {
	Method     string
	RequestURI string // as sent: escaped path and query
	Path       string // unescaped
	Query      string
	APIKey     string
	Header     http.Header
	Body       string
}

// Misbehaviours, chosen by argument values.
const (
	SlowOrderQuantity = 7391957 // placeOrder with this quantity answers after Slow
	DropOrderQuantity = 6161637 // placeOrder with this quantity: the connection is closed, no answer
	SlowOrderID       = 7391957 // getOrderById of this id answers after Slow
	FailingPetID      = 500     // getPetById of this id answers 500
	BigUser           = "big"   // getUserByName of this user answers BigBytes of JSON
	BigBytes          = 2 << 20
	PageSize          = 2 // findPetsByStatus pages
)

// Slow is how long the slow operations take.
var Slow = 3 * time.Second

// Server is a running petstore.
type Server struct {
	// BaseURL is the API's base URL (the spec's server, /v3).
	BaseURL string
	// Key is the API key every request must carry in the api_key header.
	Key string

	srv  *httptest.Server
	mu   sync.Mutex
	pets map[int64]Pet
	reqs []Request
}

// Start serves a petstore on loopback with a few pets.
func Start(key string) *Server {
	s := &Server{Key: key, pets: map[int64]Pet{}}
	for _, p := range []Pet{
		{ID: 1, Name: "Rex", Status: "available", PhotoURLs: []string{}},
		{ID: 2, Name: "Tom", Status: "available", PhotoURLs: []string{}},
		{ID: 3, Name: "Kitty", Status: "available", PhotoURLs: []string{}},
		{ID: 4, Name: "Goldie", Status: "sold", PhotoURLs: []string{}},
		{ID: 7, Name: "Doggie", Status: "pending", Category: &Named{ID: 1, Name: "Dogs"}, PhotoURLs: []string{"https://example.com/doggie.jpg"}},
	} {
		s.pets[p.ID] = p
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v3/pet/{petId}", s.getPet)
	mux.HandleFunc("DELETE /v3/pet/{petId}", s.deletePet)
	mux.HandleFunc("POST /v3/pet/{petId}", s.updatePetWithForm)
	mux.HandleFunc("POST /v3/pet", s.addPet)
	mux.HandleFunc("PUT /v3/pet", s.addPet)
	mux.HandleFunc("GET /v3/pet/findByStatus", s.findByStatus)
	mux.HandleFunc("GET /v3/store/inventory", s.inventory)
	mux.HandleFunc("POST /v3/store/order", s.placeOrder)
	mux.HandleFunc("GET /v3/store/order/{orderId}", s.getOrder)
	mux.HandleFunc("GET /v3/user/login", s.login)
	mux.HandleFunc("GET /v3/user/{username}", s.getUser)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		s.mu.Lock()
		s.reqs = append(s.reqs, Request{Method: r.Method, RequestURI: r.RequestURI, Path: r.URL.Path, Query: r.URL.RawQuery,
			APIKey: r.Header.Get("api_key"), Header: r.Header.Clone(), Body: string(b)})
		s.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		if r.Header.Get("api_key") != s.Key {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 401, "message": "missing or wrong api_key"})
			return
		}
		mux.ServeHTTP(w, r)
	}))
	s.BaseURL = s.srv.URL + "/v3"
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// CloseClientConnections drops open connections.
func (s *Server) CloseClientConnections() { s.srv.CloseClientConnections() }

// Requests is every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// Pet returns a stored pet.
func (s *Server) Pet(id int64) (Pet, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pets[id]
	return p, ok
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) petID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("petId"), 10, 64)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 400, "message": "Invalid ID supplied"})
		return 0, false
	}
	return id, true
}

func (s *Server) getPet(w http.ResponseWriter, r *http.Request) {
	id, ok := s.petID(w, r)
	if !ok {
		return
	}
	if id == FailingPetID {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"code": 500, "message": "the pet database is on fire"})
		return
	}
	p, ok := s.Pet(id)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "message": "Pet not found"})
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) deletePet(w http.ResponseWriter, r *http.Request) {
	id, ok := s.petID(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	delete(s.pets, id)
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *Server) updatePetWithForm(w http.ResponseWriter, r *http.Request) {
	id, ok := s.petID(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	p, ok := s.pets[id]
	if ok {
		if n := r.URL.Query().Get("name"); n != "" {
			p.Name = n
		}
		if st := r.URL.Query().Get("status"); st != "" {
			p.Status = st
		}
		s.pets[id] = p
	}
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "message": "Pet not found"})
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) addPet(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]any{"code": 415, "message": "want application/json, got " + ct})
		return
	}
	var p Pet
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || p.Name == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"code": 422, "message": fmt.Sprintf("Validation exception: %v", err)})
		return
	}
	s.mu.Lock()
	if p.ID == 0 {
		p.ID = int64(len(s.pets) + 100)
	}
	s.pets[p.ID] = p
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, p)
}

// findByStatus pages with ?page=N and a Link header to the next page.
func (s *Server) findByStatus(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	if status == "" {
		status = "available"
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if page < 1 {
		page = 1
	}
	s.mu.Lock()
	var all []Pet
	for _, p := range s.pets {
		if p.Status == status {
			all = append(all, p)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b Pet) int { return int(a.ID - b.ID) })
	from := min((page-1)*PageSize, len(all))
	to := min(from+PageSize, len(all))
	if to < len(all) {
		w.Header().Set("Link", fmt.Sprintf(`<%s/pet/findByStatus?status=%s&page=%d>; rel="next"`, s.BaseURL, status, page+1))
	}
	writeJSON(w, http.StatusOK, append([]Pet{}, all[from:to]...))
}

func (s *Server) inventory(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	inv := map[string]int{}
	for _, p := range s.pets {
		inv[p.Status]++
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, inv)
}

func (s *Server) placeOrder(w http.ResponseWriter, r *http.Request) {
	var o struct {
		ID       int64 `json:"id"`
		PetID    int64 `json:"petId"`
		Quantity int   `json:"quantity"`
	}
	if err := json.NewDecoder(r.Body).Decode(&o); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 400, "message": "Invalid input"})
		return
	}
	switch o.Quantity {
	case SlowOrderQuantity:
		select {
		case <-time.After(Slow):
		case <-r.Context().Done():
			return
		}
	case DropOrderQuantity:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": o.ID, "petId": o.PetID, "quantity": o.Quantity, "status": "placed"})
}

func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("orderId"), 10, 64)
	if id == SlowOrderID {
		select {
		case <-time.After(Slow):
		case <-r.Context().Done():
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "petId": 7, "quantity": 1, "status": "placed"})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Rate-Limit", "5000")
	fmt.Fprintf(w, "logged in user session: %s", r.URL.Query().Get("username"))
}

func (s *Server) getUser(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("username")
	if name == BigUser {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"username":"big","bio":"%s"}`, strings.Repeat("x", BigBytes))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"username": name, "firstName": "Ada", "email": name + "@example.com"})
}
