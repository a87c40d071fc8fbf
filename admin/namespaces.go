package admin

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/memory"
)

// Namespace is one user vera holds memories of, as GET /namespaces lists
// it: who their client said they are, how many memories of each type they
// have, when they last chatted, and their current profile.
type Namespace struct {
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	Email     string         `json:"email"`
	Counts    map[string]int `json:"counts"`
	LastSeen  *time.Time     `json:"last_seen"`
	Profile   string         `json:"profile"`
}

// namespaceTypes are the types GET /namespaces counts.
var namespaceTypes = []memory.Type{memory.Raw, memory.Curated, memory.Rule, memory.Profile, memory.Forgotten}

// listNamespaces serves GET /namespaces: every namespace the store holds
// memories of, most recently seen first, with who the directory says it
// is. A namespace the directory knows but the store holds nothing of
// (forgotten, or noted by an older version for a request that stored
// nothing) is not listed: the list, and the time it takes, grow only
// with what is stored.
func (s *Server) listNamespaces(c *gin.Context) error {
	ctx := c.Request.Context()
	seen, err := s.Memories.Directory.All(ctx)
	if err != nil {
		return httpError(http.StatusServiceUnavailable, "reading the namespaces seen: "+err.Error())
	}
	spaces, err := s.Memories.Store.Namespaces(ctx)
	if err != nil {
		return httpError(http.StatusServiceUnavailable, "reading the store: "+err.Error())
	}
	out := make([]Namespace, 0, len(spaces))
	for _, ns := range spaces {
		n := Namespace{Namespace: ns, Counts: map[string]int{}}
		if who, ok := seen[ns]; ok {
			n.Name, n.Email = who.Name, who.Email
			if !who.LastSeen.IsZero() {
				at := who.LastSeen
				n.LastSeen = &at
			}
		}
		for _, t := range namespaceTypes {
			if n.Counts[string(t)], err = s.Memories.Store.Count(ctx, memory.Filter{Namespace: ns, Types: []memory.Type{t}}); err != nil {
				return httpError(http.StatusServiceUnavailable, "counting memories: "+err.Error())
			}
		}
		if n.Counts[string(memory.Profile)] > 0 {
			p, err := memory.CurrentProfile(ctx, s.Memories.Store, ns)
			if err != nil {
				return httpError(http.StatusServiceUnavailable, "reading a profile: "+err.Error())
			}
			if p != nil {
				n.Profile = p.Text
			}
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Namespace) int {
		var ta, tb time.Time
		if a.LastSeen != nil {
			ta = *a.LastSeen
		}
		if b.LastSeen != nil {
			tb = *b.LastSeen
		}
		return cmp.Or(tb.Compare(ta), cmp.Compare(a.Namespace, b.Namespace))
	})
	c.JSON(http.StatusOK, gin.H{"namespaces": out})
	return nil
}
