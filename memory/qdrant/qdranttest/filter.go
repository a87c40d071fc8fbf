package qdranttest

import (
	"slices"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Filters: a point's payload against Qdrant's conditions, as Qdrant
// reads them (and refuses what it refuses).

// strs returns a payload value's strings (a string, or a list's strings).
func strs(v *qdrant.Value) []string {
	if l := v.GetListValue(); l != nil {
		var out []string
		for _, x := range l.GetValues() {
			out = append(out, strs(x)...)
		}
		return out
	}
	if s, ok := v.GetKind().(*qdrant.Value_StringValue); ok {
		return []string{s.StringValue}
	}
	return nil
}

// numbers returns a payload value's numbers.
func numbers(v *qdrant.Value) []float64 {
	switch k := v.GetKind().(type) {
	case *qdrant.Value_IntegerValue:
		return []float64{float64(k.IntegerValue)}
	case *qdrant.Value_DoubleValue:
		return []float64{k.DoubleValue}
	case *qdrant.Value_ListValue:
		var out []float64
		for _, x := range k.ListValue.GetValues() {
			out = append(out, numbers(x)...)
		}
		return out
	}
	return nil
}

// matches applies a filter. RULE: must = all, should = at least one (when
// present), must_not = none; a keyword match is exact and matches any
// element of an array; keywords (match any) matches if any value is among
// them; a range compares numbers; has_vector needs the named vector.
// https://qdrant.tech/documentation/concepts/filtering/
func (c *collection) matches(p *point, f *qdrant.Filter) (bool, error) {
	if f == nil {
		return true, nil
	}
	for _, cond := range f.GetMust() {
		ok, err := c.condition(p, cond)
		if err != nil || !ok {
			return false, err
		}
	}
	for _, cond := range f.GetMustNot() {
		ok, err := c.condition(p, cond)
		if err != nil || ok {
			return false, err
		}
	}
	if len(f.GetShould()) > 0 {
		for _, cond := range f.GetShould() {
			ok, err := c.condition(p, cond)
			if err != nil {
				return false, err
			}
			if ok {
				return true, nil
			}
		}
		return false, nil
	}
	return true, nil
}

func (c *collection) condition(p *point, cond *qdrant.Condition) (bool, error) {
	switch k := cond.GetConditionOneOf().(type) {
	case *qdrant.Condition_Filter:
		return c.matches(p, k.Filter)
	case *qdrant.Condition_HasVector:
		name := k.HasVector.GetHasVector()
		if _, ok := c.dense[name]; !ok {
			if _, ok := c.sparse[name]; !ok {
				return false, bad("Not existing vector name error: %s", name)
			}
		}
		_, d := p.dense[name]
		_, s := p.sparse[name]
		return d || s, nil
	case *qdrant.Condition_HasId:
		for _, id := range k.HasId.GetHasId() {
			if pk, _, err := key(id); err == nil {
				if qk, _, _ := key(p.id); pk == qk {
					return true, nil
				}
			}
		}
		return false, nil
	case *qdrant.Condition_Field:
		if _, ok := c.indexes[k.Field.GetKey()]; c.strict && !ok {
			// RULE: in strict mode, a filter needs its field indexed.
			return false, bad("Index required but not found for \"%s\" of one of the following types: [integer]. Help: Create an index for this key or use a different filter.", k.Field.GetKey())
		}
		return fieldMatches(p.payload[k.Field.GetKey()], k.Field)
	}
	return false, status.Errorf(codes.Unimplemented, "stand-in: condition %T not implemented", cond.GetConditionOneOf())
}

func fieldMatches(v *qdrant.Value, fc *qdrant.FieldCondition) (bool, error) {
	if m := fc.GetMatch(); m != nil {
		values := strs(v)
		switch mv := m.GetMatchValue().(type) {
		case *qdrant.Match_Keyword:
			return slices.Contains(values, mv.Keyword), nil
		case *qdrant.Match_Keywords:
			for _, want := range mv.Keywords.GetStrings() {
				if slices.Contains(values, want) {
					return true, nil
				}
			}
			return false, nil
		case *qdrant.Match_ExceptKeywords:
			for _, not := range mv.ExceptKeywords.GetStrings() {
				if slices.Contains(values, not) {
					return false, nil
				}
			}
			return true, nil
		}
		return false, status.Errorf(codes.Unimplemented, "stand-in: match %T not implemented", m.GetMatchValue())
	}
	if r := fc.GetRange(); r != nil {
		for _, x := range numbers(v) {
			if (r.Gt == nil || x > r.GetGt()) && (r.Gte == nil || x >= r.GetGte()) &&
				(r.Lt == nil || x < r.GetLt()) && (r.Lte == nil || x <= r.GetLte()) {
				return true, nil
			}
		}
		return false, nil
	}
	return false, status.Errorf(codes.Unimplemented, "stand-in: field condition on %q not implemented", fc.GetKey())
}
