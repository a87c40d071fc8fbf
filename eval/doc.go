// Package eval is the home of vera's offline evaluations, one subpackage
// each, run by `vera eval`: locomo measures how much of a question's
// evidence the memory layers recall on LoCoMo conversations; routing
// scores the tier classifier on labelled queries. This package only
// carries the labelled routing set, testdata/routing.jsonl, into the
// binary.
package eval

import _ "embed"

// RoutingSet is testdata/routing.jsonl: labelled queries, one JSON object
// a line ({"query","tier","lang","split"}).
//
//go:embed testdata/routing.jsonl
var RoutingSet []byte
