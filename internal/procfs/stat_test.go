package procfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	tail := " 20 0 1 0 4242 0 0\n"
	for _, tc := range []struct {
		name, data string
		want       Stat
		err        string
	}{
		{name: "kernel thread", data: "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0" + tail,
			want: Stat{Flags: 2129984, Start: 4242}},
		{name: "comm with spaces and parentheses", data: "77 (a (b) c) R 1 0 0 0 -1 64 0 0 0 0 0 0 0 0" + tail,
			want: Stat{Flags: 64, Start: 4242}},
		{name: "no comm", data: "77 a R 1", err: "no comm in parentheses"},
		{name: "truncated", data: "77 (a) R 1 0 0 0 -1 64\n", err: "7 fields after the comm, want at least 20"},
		{name: "flags not a number", data: "77 (a) R 1 0 0 0 -1 x 0 0 0 0 0 0 0 0" + tail, err: "invalid syntax"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStat("/proc/77/stat", []byte(tc.data))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.ErrorContains(t, err, "/proc/77/stat")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	kthreadd, _ := ParseStat("", []byte("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0"+tail))
	assert.True(t, kthreadd.Kernel())
	assert.False(t, kthreadd.Pinned())
	worker, _ := ParseStat("", []byte("9 (kworker/0:1) I 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0"+tail))
	assert.True(t, worker.Kernel() && worker.Pinned())
}

func TestReadStatOfThisProcess(t *testing.T) {
	st, err := ReadStat("/proc/self/stat")
	require.NoError(t, err)
	assert.False(t, st.Kernel())
	assert.NotZero(t, st.Start)
	_, err = ReadStat(filepath.Join(t.TempDir(), "gone"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestCgroupPaths(t *testing.T) {
	assert.Equal(t, []string{"/kubepods/pod1/abc"}, CgroupPaths("0::/kubepods/pod1/abc\n"))
	assert.Equal(t, []string{"/system.slice/a:b", "/"},
		CgroupPaths("12:cpuset:/system.slice/a:b\n3:name=systemd:/\n\n"))
	assert.Empty(t, CgroupPaths("garbage\n"))
}
