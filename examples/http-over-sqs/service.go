package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// This file is an ordinary net/http service: nothing in it knows about
// SQS.

type todo struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
	Done  bool   `json:"done"`
}

type todoStore struct {
	mu    sync.Mutex
	items []todo
}

// newMux returns the service's routes.
func newMux() *http.ServeMux {
	s := &todoStore{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /todos", s.create)
	mux.HandleFunc("GET /todos/{id}", s.get)
	mux.HandleFunc("GET /todos", s.list)
	mux.HandleFunc("GET /countdown", countdown)
	return mux
}

func (s *todoStore) create(w http.ResponseWriter, r *http.Request) {
	var t todo
	if err := json.NewDecoder(r.Body).Decode(&t); err != nil || t.Title == "" {
		http.Error(w, "want a JSON body with a title", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	t.ID = len(s.items) + 1
	s.items = append(s.items, t)
	s.mu.Unlock()
	w.Header().Set("Location", "/todos/"+strconv.Itoa(t.ID))
	writeJSON(w, http.StatusCreated, t)
}

func (s *todoStore) get(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(r.PathValue("id"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 1 || id > len(s.items) {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, s.items[id-1])
}

func (s *todoStore) list(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.items)
}

// countdown streams one line per tick, flushing each: the client reads
// them as they come.
func countdown(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.URL.Query().Get("from"))
	if err != nil || n < 1 || n > 10 {
		http.Error(w, "from: 1 to 10", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	for i := n; i > 0; i-- {
		fmt.Fprintf(w, "%d\n", i)
		w.(http.Flusher).Flush()
		select {
		case <-time.After(100 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	fmt.Fprintln(w, "liftoff")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
