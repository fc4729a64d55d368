package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKernelWorkKeys(t *testing.T) {
	def := Default()
	assert.False(t, def.RPSHeld(), "off by default")
	assert.False(t, def.WorkqueuesHeld(), "off by default")

	cfg, err := Parse(strings.NewReader("kernelWork: {receivePacketSteering: held, workqueues: \"off\"}\n"), "kw.yaml")
	require.NoError(t, err)
	assert.True(t, cfg.RPSHeld())
	assert.False(t, cfg.WorkqueuesHeld())

	for _, tc := range []struct{ yaml, want string }{
		{"kernelWork: {receivePacketSteering: always}", `kernelWork.receivePacketSteering: "always" is not one of off, held`},
		{"kernelWork: {workqueues: true}", `kernelWork.workqueues: "true" is not one of off, held`},
		{"kernelWork: {rps: held}", "unknown key kernelWork.rps"},
	} {
		_, err := Parse(strings.NewReader(tc.yaml), "bad.yaml")
		assert.ErrorContains(t, err, tc.want)
	}
}
