package qdrant

import (
	"fmt"
	"strconv"
	"time"

	"github.com/qdrant/go-client/qdrant"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/text"
)

// A memory as a Qdrant point, and back (the layout is in the package doc).

// point renders a memory as a Qdrant point.
func point(m memory.Memory) (*qdrant.PointStruct, error) {
	payload := map[string]any{
		fieldNamespace: m.Namespace,
		fieldType:      string(m.Type),
		fieldText:      m.Text,
		fieldTimestamp: m.Time.UTC().Format(time.RFC3339Nano),
		fieldTS:        m.Time.UnixMicro(),
		fieldModel:     m.Model,
		fieldTokens:    m.Tokens,
		fieldTermsV:    text.TermsVersion,
	}
	if len(m.Metadata) > 0 {
		payload[fieldMetadata] = m.Metadata
	}
	values, err := qdrant.TryValueMap(payload)
	if err != nil {
		return nil, fmt.Errorf("memory %s: metadata: %w", m.ID, err)
	}
	vectors := map[string]*qdrant.Vector{}
	if m.Vector != nil {
		vectors[denseVector] = qdrant.NewVectorDense(m.Vector)
	}
	if idx, vals := SparseDoc(m.Text); len(idx) > 0 {
		vectors[sparseVector] = qdrant.NewVectorSparse(idx, vals)
	}
	return &qdrant.PointStruct{Id: qdrant.NewID(m.ID), Vectors: qdrant.NewVectorsMap(vectors), Payload: values}, nil
}

// memoryOf reads a point back into a memory.
func memoryOf(id *qdrant.PointId, payload map[string]*qdrant.Value, vector []float32) (memory.Memory, error) {
	m := memory.Memory{
		ID:        id.GetUuid(),
		Namespace: payload[fieldNamespace].GetStringValue(),
		Type:      memory.Type(payload[fieldType].GetStringValue()),
		Text:      payload[fieldText].GetStringValue(),
		Model:     payload[fieldModel].GetStringValue(),
		Tokens:    int(payload[fieldTokens].GetIntegerValue()),
	}
	if m.ID == "" {
		m.ID = strconv.FormatUint(id.GetNum(), 10)
	}
	ts := payload[fieldTimestamp].GetStringValue()
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return m, fmt.Errorf("point %s: timestamp %q: %w", m.ID, ts, err)
	}
	m.Time = t.UTC()
	if md := payload[fieldMetadata].GetStructValue(); md != nil {
		m.Metadata = structToMap(md)
	}
	if len(vector) > 0 {
		m.Vector = vector
	}
	return m, nil
}

// ValueToAny converts a Qdrant payload value to plain Go (nil, bool,
// int64, float64, string, []any, map[string]any).
func ValueToAny(v *qdrant.Value) any {
	switch k := v.GetKind().(type) {
	case *qdrant.Value_BoolValue:
		return k.BoolValue
	case *qdrant.Value_IntegerValue:
		return k.IntegerValue
	case *qdrant.Value_DoubleValue:
		return k.DoubleValue
	case *qdrant.Value_StringValue:
		return k.StringValue
	case *qdrant.Value_ListValue:
		out := make([]any, len(k.ListValue.GetValues()))
		for i, x := range k.ListValue.GetValues() {
			out[i] = ValueToAny(x)
		}
		return out
	case *qdrant.Value_StructValue:
		return structToMap(k.StructValue)
	}
	return nil
}

func structToMap(s *qdrant.Struct) map[string]any {
	out := make(map[string]any, len(s.GetFields()))
	for k, v := range s.GetFields() {
		out[k] = ValueToAny(v)
	}
	return out
}
