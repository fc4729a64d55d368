package plural

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/cpuset"
)

func TestSingularForOne(t *testing.T) {
	assert.Equal(t, "1 CPU", Count(1, "CPU"))
	assert.Equal(t, "0 CPUs", Count(0, "CPU"))
	assert.Equal(t, "2 NUMA nodes", Count(2, "NUMA node"))
	assert.Equal(t, "CPU 7", CPUs(cpuset.New(7)))
	assert.Equal(t, "CPUs 4-6", CPUs(cpuset.New(4, 5, 6)))
	assert.Equal(t, "is", Verb(1, "is", "are"))
	assert.Equal(t, "are", Verb(3, "is", "are"))
}
