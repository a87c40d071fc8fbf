// Package eval is the home of vera's offline evaluations, one subpackage
// each, run by `vera eval`: locomo measures how much of a question's
// evidence the memory layers recall on LoCoMo conversations; routing
// scores the tier classifier on labelled queries. This package carries
// the labelled routing sets into the binary, and the statistics both
// share.
package eval

import _ "embed"

// RoutingSet is testdata/routing.jsonl: the older labelled queries, one
// JSON object a line ({"query","tier","lang","split"}), which the
// regular expressions of the first routing were written against. Never
// trained on.
//
//go:embed testdata/routing.jsonl
var RoutingSet []byte

// RoutingCorpus is testdata/routing-corpus.jsonl: the labelled queries
// the learned stage is trained on and cross-validated with
// ({"text","tier","lang","group","source"}; testdata/ROUTING.md).
//
//go:embed testdata/routing-corpus.jsonl
var RoutingCorpus []byte

// RoutingSecond is testdata/routing-second.jsonl: 100 lines of the corpus
// labelled again, independently, for the labels' agreement.
//
//go:embed testdata/routing-second.jsonl
var RoutingSecond []byte
