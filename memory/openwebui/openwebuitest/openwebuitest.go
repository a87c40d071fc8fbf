// Package openwebuitest is a fake Open WebUI for tests: its memories API
// (GET /api/v1/memories/) answering as Open WebUI's own code does
// (backend/open_webui/routers/memories.py behind utils/auth.py), with
// the statuses and {"detail": ...} bodies of each refusal.
package openwebuitest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Open WebUI's messages (backend/open_webui/constants.py ERROR_MESSAGES,
// and the literals of utils/auth.py).
const (
	DetailInvalidToken     = "Your session has expired or the token is invalid. Please sign in again."
	DetailUnauthorized     = "401 Unauthorized"
	DetailNotAuthenticated = "Not authenticated"
	DetailProhibited       = "You do not have permission to access this resource. Please contact your administrator for assistance."
	DetailAPIKeyNotAllowed = "Use of API key is not enabled in the environment."
	DetailNotFound         = "We could not find what you're looking for :/"
)

// Server is a fake Open WebUI. Memories are on (memories.enable), API
// keys allowed, every user has the features.memories permission, until a
// test says otherwise.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	off      bool             // memories.enable false
	noKeys   bool             // auth.enable_api_keys false
	users    map[string]*user // by token
	memories []Memory
	gets     int
}

type user struct {
	id, role  string
	forbidden bool // no features.memories permission
}

// Memory is a memory as Open WebUI's MemoryModel holds it.
type Memory struct {
	ID        string `json:"id"`
	UserID    string `json:"user_id"`
	Content   string `json:"content"`
	UpdatedAt int64  `json:"updated_at"`
	CreatedAt int64  `json:"created_at"`
}

// New starts a fake Open WebUI, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{users: map[string]*user{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// AddUser lets token (an "sk-" API key or a session token) in as user id
// with role ("user", "admin" or "pending").
func (s *Server) AddUser(token, id, role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[token] = &user{id: id, role: role}
}

// Forbid takes the features.memories permission from user id.
func (s *Server) Forbid(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.users {
		if u.id == id {
			u.forbidden = true
		}
	}
}

// TurnOff turns memories off (Admin Settings: ENABLE_MEMORIES false).
func (s *Server) TurnOff() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.off = true
}

// RefuseAPIKeys turns API keys off (ENABLE_API_KEYS false).
func (s *Server) RefuseAPIKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noKeys = true
}

// Add stores a memory of user id, its times in epoch seconds.
func (s *Server) Add(m Memory) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.memories = append(s.memories, m)
}

// Gets counts the GET /api/v1/memories/ answered.
func (s *Server) Gets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/api/v1/memories" && r.Method == http.MethodGet:
		// FastAPI's redirect_slashes.
		http.Redirect(w, r, "/api/v1/memories/", http.StatusTemporaryRedirect)
	case r.URL.Path == "/api/v1/memories/" && r.Method == http.MethodGet:
		s.getMemories(w, r)
	case r.URL.Path == "/api/v1/memories/" || r.URL.Path == "/api/v1/memories":
		detail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
	default:
		detail(w, http.StatusNotFound, "Not Found")
	}
}

// getMemories is get_memories: get_verified_user, then
// check_memories_permission, then the user's memories.
func (s *Server) getMemories(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "bearer") || token == "" {
		detail(w, http.StatusForbidden, DetailNotAuthenticated)
		return
	}
	u := s.users[token]
	switch {
	case strings.HasPrefix(token, "sk-") && s.noKeys:
		detail(w, http.StatusForbidden, DetailAPIKeyNotAllowed)
		return
	case u == nil && strings.HasPrefix(token, "sk-"):
		detail(w, http.StatusUnauthorized, DetailInvalidToken)
		return
	case u == nil:
		detail(w, http.StatusUnauthorized, DetailUnauthorized)
		return
	case u.role != "user" && u.role != "admin":
		detail(w, http.StatusUnauthorized, DetailProhibited)
		return
	case s.off:
		detail(w, http.StatusNotFound, DetailNotFound)
		return
	case u.role != "admin" && u.forbidden:
		detail(w, http.StatusForbidden, DetailProhibited)
		return
	}
	// The MemoryModel of Open WebUI's latest versions, with the fields
	// added since (type, path, meta).
	out := []map[string]any{}
	for _, m := range s.memories {
		if m.UserID == u.id {
			out = append(out, map[string]any{"id": m.ID, "user_id": m.UserID, "type": "context", "path": nil,
				"content": m.Content, "meta": map[string]any{"created_by": "manual"}, "updated_at": m.UpdatedAt, "created_at": m.CreatedAt})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// detail answers as FastAPI's HTTPException does.
func detail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"detail": msg})
}
