// Package eval is the home of vera's offline evaluations, one subpackage
// each, run by `vera eval`: locomo measures how much of a question's
// evidence the memory layers recall on LoCoMo conversations. It holds no
// code of its own.
package eval
