package state

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestASecondTryLockIsRefusedNamingTheHolder(t *testing.T) {
	stateFile := filepath.Join(t.TempDir(), "state", "state.json")
	l, err := TryLock(stateFile)
	require.NoError(t, err)
	defer l.Close()
	assert.Equal(t, filepath.Join(filepath.Dir(stateFile), LockFile), l.Path())

	_, err = TryLock(stateFile)
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), fmt.Sprintf("held by pid %d, since ", os.Getpid()))

	// Another state file of the same directory shares its companions
	// (journal, grants, claims), so it shares the lock.
	_, err = TryLock(filepath.Join(filepath.Dir(stateFile), "other.json"))
	require.ErrorIs(t, err, ErrLocked)

	require.NoError(t, l.Close())
	again, err := TryLock(stateFile)
	require.NoError(t, err, "a closed lock is free")
	again.Close()
}

func TestLockWaitsForTheHolderAndTakesOver(t *testing.T) {
	stateFile := filepath.Join(t.TempDir(), "state.json")
	first, err := TryLock(stateFile)
	require.NoError(t, err)

	waited := make(chan string, 1)
	got := make(chan *DirLock, 1)
	go func() {
		l, err := Lock(context.Background(), stateFile, func(holder string) { waited <- holder })
		assert.NoError(t, err)
		got <- l
	}()
	select {
	case holder := <-waited:
		assert.Equal(t, fmt.Sprintf("pid %d", os.Getpid()), strings.Split(holder, ",")[0])
	case <-time.After(10 * time.Second):
		t.Fatal("Lock did not say it waits")
	}
	select {
	case <-got:
		t.Fatal("Lock took a held lock")
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, first.Close())
	select {
	case l := <-got:
		require.NotNil(t, l)
		l.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("Lock did not take the lock once it was free")
	}
}

func TestLockGivesUpWhenItsContextEnds(t *testing.T) {
	stateFile := filepath.Join(t.TempDir(), "state.json")
	first, err := TryLock(stateFile)
	require.NoError(t, err)
	defer first.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = Lock(ctx, stateFile, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), LockFile)
}

// TestLockTakesOverFromAKilledHolder: a holder killed by SIGKILL leaves no
// lock behind, whatever its file says.
func TestLockTakesOverFromAKilledHolder(t *testing.T) {
	stateFile := filepath.Join(t.TempDir(), "state.json")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLockHolderProcess$")
	cmd.Env = append(os.Environ(), "LOCK_HOLDER_STATE_FILE="+stateFile)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", line)

	_, err = TryLock(stateFile)
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), fmt.Sprintf("pid %d", cmd.Process.Pid))

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := Lock(ctx, stateFile, nil)
	require.NoError(t, err)
	defer l.Close()
	assert.Contains(t, Holder(l.Path()), fmt.Sprintf("pid %d,", os.Getpid()), "the new holder says who it is")
}

// TestLockHolderProcess is the holder TestLockTakesOverFromAKilledHolder
// kills; it does nothing in a normal run.
func TestLockHolderProcess(t *testing.T) {
	stateFile := os.Getenv("LOCK_HOLDER_STATE_FILE")
	if stateFile == "" {
		t.Skip("the helper process of TestLockTakesOverFromAKilledHolder")
	}
	if _, err := TryLock(stateFile); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute)
	os.Exit(1)
}

func TestHolderOfAnEmptyOrMissingFile(t *testing.T) {
	dir := t.TempDir()
	assert.Equal(t, "a process that did not say which", Holder(filepath.Join(dir, "missing")))
	p := filepath.Join(dir, LockFile)
	require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("x", 300)), 0o600))
	assert.Equal(t, "a process that did not say which", Holder(p), "a long file is not echoed")
}
