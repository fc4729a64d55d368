package hostfiles

import (
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
)

func TestWarningsAreLoggedOncePerTopicWhileTheyStay(t *testing.T) {
	var out strings.Builder
	log := logrus.New()
	log.SetOutput(&out)
	w := NewWarnings(log)
	w.Once("a", "a is wrong")
	w.Once("a", "a is wrong")
	w.Once("b", "b is wrong")
	assert.Equal(t, 1, strings.Count(out.String(), "a is wrong"), "the same warning of a topic once")
	assert.Equal(t, []string{"a is wrong", "b is wrong"}, w.List())

	w.Once("a", "a is wrong otherwise")
	assert.Contains(t, out.String(), "a is wrong otherwise", "a new warning of a topic is logged")
	w.Clear("a")
	w.Once("a", "a is wrong otherwise")
	assert.Equal(t, 2, strings.Count(out.String(), "a is wrong otherwise"), "a cleared topic warns again")

	w.Retain(func(key string) bool { return key == "b" })
	assert.Equal(t, []string{"b is wrong"}, w.List())
}
