package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWantColor(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		mode     colorMode
		env      func(string) string
		terminal bool
		want     bool
	}{
		{colorAuto, env(), true, true},
		{colorAuto, env(), false, false},
		{colorAuto, env("NO_COLOR", "1"), true, false},
		{colorAuto, env("NO_COLOR", ""), true, true}, // set but empty does not count
		{colorAuto, env("TERM", "dumb"), true, false},
		{colorAlways, env("NO_COLOR", "1"), false, true},
		{colorNever, env(), true, false},
	} {
		assert.Equal(t, tc.want, wantColor(tc.mode, tc.env, tc.terminal), "%+v", tc)
	}

	assert.True(t, utf8Locale(env("LANG", "en_US.UTF-8")))
	assert.True(t, utf8Locale(env("LC_CTYPE", "C.utf8", "LANG", "C")))
	assert.False(t, utf8Locale(env("LC_ALL", "C", "LANG", "en_US.UTF-8")), "LC_ALL wins")
	assert.False(t, utf8Locale(env()), "no locale: C")

	var m colorMode
	assert.NoError(t, m.Set("never"))
	assert.Equal(t, colorNever, m)
	assert.EqualError(t, m.Set("sometimes"), `want auto, always or never, not "sometimes"`)
}
