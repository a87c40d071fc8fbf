package text

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTerms(t *testing.T) {
	assert.Equal(t, []string{"carolin", "paint", "sunris", "happen", "2022"}, Terms("When did Caroline's painting of the sunrise happen? In 2022!"))
	assert.Equal(t, Terms("paints"), Terms("painted"))
	assert.Equal(t, Terms("adopted"), Terms("adoption"), "Porter2 folds derivations too")
	assert.Equal(t, []string{"adopt", "agenc"}, Terms("adoption agencies"))
	assert.Equal(t, []string{"café", "über"}, Terms("Café ÜBER"), "other scripts are kept whole")
	assert.Equal(t, []string{"4417", "b12"}, Terms("4417 B12"), "numbers exactly")
	assert.Empty(t, Terms("the and of it"))
	// Russian: stop words dropped, Cyrillic words stemmed.
	assert.Equal(t, Terms("Я переехала в Лиссабон"), Terms("переехал лиссабона"))
	assert.Empty(t, Terms("и в не что это"))
}
