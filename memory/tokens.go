package memory

import (
	"fmt"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// cl100kPattern is cl100k_base's pre-tokenizer, as tiktoken defines it.
const cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Tokenizer counts tokens with tiktoken's cl100k_base. The ranks come from
// the copy compiled into the binary (tiktoken-go-loader): nothing is
// downloaded at run time, and no package-level loader is installed. It is
// safe for concurrent use.
type Tokenizer struct {
	enc *tiktoken.Tiktoken
}

// NewTokenizer loads cl100k_base. It takes a few hundred milliseconds:
// build one and share it.
func NewTokenizer() (*Tokenizer, error) {
	ranks, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe("cl100k_base.tiktoken")
	if err != nil {
		return nil, fmt.Errorf("load cl100k_base: %w", err)
	}
	special := map[string]int{
		"<|endoftext|>":   100257,
		"<|fim_prefix|>":  100258,
		"<|fim_middle|>":  100259,
		"<|fim_suffix|>":  100260,
		"<|endofprompt|>": 100276,
	}
	bpe, err := tiktoken.NewCoreBPE(ranks, special, cl100kPattern)
	if err != nil {
		return nil, fmt.Errorf("build cl100k_base: %w", err)
	}
	set := make(map[string]any, len(special))
	for k := range special {
		set[k] = true
	}
	enc := tiktoken.NewTiktoken(bpe, &tiktoken.Encoding{
		Name: "cl100k_base", PatStr: cl100kPattern, MergeableRanks: ranks, SpecialTokens: special,
	}, set)
	return &Tokenizer{enc: enc}, nil
}

// Count returns the number of tokens in s. Special-token text such as
// "<|endoftext|>" in user input counts as ordinary text, never as a control
// token.
func (t *Tokenizer) Count(s string) int {
	if s == "" {
		return 0
	}
	return len(t.enc.EncodeOrdinary(s))
}
