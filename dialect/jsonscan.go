package dialect

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The tee reads a few fields of every record of every answer as it streams
// past. Decoding each record with encoding/json allocates a dozen times per
// record; these functions read the fields in place instead, so a forwarded
// record costs no allocation. They expect JSON that json.Valid accepted
// (which allocates nothing either), and report false for anything that is
// not the shape asked for.

// members calls fn with each member of the JSON object in data: its key as
// written, without the quotes, and its raw value. It reports false when
// data is not an object; null is an object without members, as
// encoding/json decodes it into a struct.
func members(data []byte, fn func(key, val []byte)) bool {
	i := skipSpace(data, 0)
	if jsonNull(bytes.TrimSpace(data[i:])) {
		return true
	}
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return true
	}
	for i < len(data) && data[i] == '"' {
		end := skipString(data, i)
		if end < 0 {
			return false
		}
		key := data[i+1 : end-1]
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		end = skipValue(data, i)
		if end < 0 {
			return false
		}
		fn(key, data[i:end])
		i = skipSpace(data, end)
		if i >= len(data) {
			return false
		}
		if data[i] == '}' {
			return true
		}
		if data[i] != ',' {
			return false
		}
		i = skipSpace(data, i+1)
	}
	return false
}

// elements calls fn with each raw element of the JSON array in data. It
// reports false when data is not an array; null is an empty one.
func elements(data []byte, fn func(val []byte)) bool {
	i := skipSpace(data, 0)
	if jsonNull(bytes.TrimSpace(data[i:])) {
		return true
	}
	if i >= len(data) || data[i] != '[' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return true
	}
	for i < len(data) {
		end := skipValue(data, i)
		if end < 0 {
			return false
		}
		fn(data[i:end])
		i = skipSpace(data, end)
		if i >= len(data) {
			return false
		}
		if data[i] == ']' {
			return true
		}
		if data[i] != ',' {
			return false
		}
		i = skipSpace(data, i+1)
	}
	return false
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just after the string starting at data[i],
// or -1.
func skipString(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index just after the value starting at data[i], or
// -1.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				if j = skipString(data, j); j < 0 {
					return -1
				}
				j-- // the loop steps past the closing quote
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// jsonNull reports whether a raw value is JSON null.
func jsonNull(val []byte) bool { return string(val) == "null" }

// jsonInt reports whether a raw value is an integer (or null, which
// decodes to zero), as an int field accepts.
func jsonInt(val []byte) bool {
	if jsonNull(val) {
		return true
	}
	digits := strings.TrimPrefix(string(val), "-")
	for i := range len(digits) {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return digits != ""
}

// jsonIs reports whether a raw value is the JSON string s, written without
// escapes (as every event type is).
func jsonIs(val []byte, s string) bool {
	return len(val) == len(s)+2 && val[0] == '"' && string(val[1:len(val)-1]) == s
}

// appendJSONString writes the text of a raw JSON string to sb; null or an
// absent value (nil) writes nothing. It reports false for anything else.
// Invalid UTF-8 becomes U+FFFD, as encoding/json decodes it.
func appendJSONString(sb *strings.Builder, val []byte) bool {
	if val == nil || jsonNull(val) {
		return true
	}
	if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
		return false
	}
	s := val[1 : len(val)-1]
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\\' {
			i++
		}
		writeUTF8(sb, s[:i])
		if i == len(s) {
			break
		}
		s = s[i:]
		if len(s) < 2 {
			return false
		}
		switch s[1] {
		case '"', '\\', '/':
			sb.WriteByte(s[1])
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, ok := hex4(s[2:])
			if !ok {
				return false
			}
			s = s[6:]
			if utf16.IsSurrogate(r) {
				// A pair: the low half is the next escape.
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					if r2, ok := hex4(s[2:]); ok {
						if c := utf16.DecodeRune(r, r2); c != utf8.RuneError {
							s = s[6:]
							sb.WriteRune(c)
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			sb.WriteRune(r)
			continue
		default:
			return false
		}
		s = s[2:]
	}
	return true
}

// writeUTF8 writes b to sb, each invalid UTF-8 byte as U+FFFD.
func writeUTF8(sb *strings.Builder, b []byte) {
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] < utf8.RuneSelf {
			i++
		}
		if i == len(b) || utf8.Valid(b[i:]) {
			sb.Write(b)
			return
		}
		sb.Write(b[:i])
		b = b[i:]
		r, size := utf8.DecodeRune(b)
		sb.WriteRune(r) // RuneError for an invalid byte
		b = b[size:]
	}
}

// hex4 reads the four hex digits of a \u escape.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// jsonText decodes a raw JSON string; anything else is "". It allocates:
// for values read once per answer, such as a response id.
func jsonText(val []byte) string {
	var s string
	if json.Unmarshal(val, &s) != nil {
		return ""
	}
	return s
}

// field returns the raw value of key in the JSON object obj; nil when obj
// is not an object or has no such member.
func field(obj []byte, key string) []byte {
	var out []byte
	members(obj, func(k, val []byte) {
		if string(k) == key {
			out = val
		}
	})
	return out
}
