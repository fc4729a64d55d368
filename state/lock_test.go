package state

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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

// onReadOnly runs f on a thread that sees dir as a read-only bind mount of
// itself: a mount namespace of that thread's own, so neither the host nor
// the test's other threads see the mount, and it ends with the thread. The
// test is skipped where mounting is not permitted (no CAP_SYS_ADMIN).
func onReadOnly(t *testing.T, dir string, f func()) {
	t.Helper()
	done := make(chan string)
	go func() {
		// Never unlocked: the thread, and its namespace, end with the
		// goroutine.
		runtime.LockOSThread()
		for _, step := range []struct {
			what string
			do   func() error
		}{
			{"unshare", func() error { return unix.Unshare(unix.CLONE_NEWNS) }},
			{"private /", func() error { return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") }},
			{"bind", func() error { return unix.Mount(dir, dir, "", unix.MS_BIND, "") }},
			{"read-only", func() error { return unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, "") }},
		} {
			if err := step.do(); err != nil {
				done <- fmt.Sprintf("a read-only mount is not permitted here (%s: %v)", step.what, err)
				return
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o600); !errors.Is(err, syscall.EROFS) {
			done <- fmt.Sprintf("the mount is not read-only: %v", err)
			return
		}
		f()
		done <- ""
	}()
	if skip := <-done; skip != "" {
		t.Skip(skip)
	}
}

// TestLockOnAReadOnlyStateDirectory: a read-only state directory does not
// stop the daemon (issue 41, item 4): the existing lock file is locked
// through a read-only descriptor, which still keeps a second daemon out
// (both ways), and the lock's Warning says so.
func TestLockOnAReadOnlyStateDirectory(t *testing.T) {
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	earlier, err := TryLock(stateFile) // a daemon that ran while it was writable
	require.NoError(t, err)
	require.NoError(t, earlier.Close())

	var l *DirLock
	onReadOnly(t, dir, func() { l, err = TryLock(stateFile) })
	require.NoError(t, err, "EROFS must not end run")
	require.NotNil(t, l)
	defer l.Close()
	assert.Contains(t, l.Warning(), "read-only descriptor")
	_, err = TryLock(stateFile)
	require.ErrorIs(t, err, ErrLocked, "a second daemon still waits")
	require.NoError(t, l.Close())

	// The other way round: a daemon holds it; the one on the read-only
	// view waits for it.
	holder, err := TryLock(stateFile)
	require.NoError(t, err)
	onReadOnly(t, dir, func() { _, err = TryLock(stateFile) })
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), fmt.Sprintf("held by pid %d, since ", os.Getpid()))
	require.NoError(t, holder.Close())
}

// TestLockThatCannotBeOpenedRunsUnlocked: on a read-only state directory
// without a lock file (a first start on a read-only disk), the daemon runs
// without the lock, and the Warning says what that risks and how to fix it.
func TestLockThatCannotBeOpenedRunsUnlocked(t *testing.T) {
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	var l *DirLock
	var err error
	onReadOnly(t, dir, func() {
		l, err = Lock(context.Background(), stateFile, func(string) { t.Error("nothing to wait for") })
	})
	require.NoError(t, err, "EROFS must not end run")
	require.NotNil(t, l)
	assert.Contains(t, l.Warning(), "read-only file system")
	assert.Contains(t, l.Warning(), "running without it, so a second nri-cpupool on this state directory is not kept out; make the directory writable")
	assert.NoError(t, l.Close())
}

// TestLockInAStateDirectoryThatCannotBeMade: the same without privileges
// to mount: the state file's directory cannot be made (a file is in the
// way), so the lock cannot be opened, and the daemon runs unlocked.
func TestLockInAStateDirectoryThatCannotBeMade(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	l, err := TryLock(filepath.Join(file, "state", "state.json"))
	require.NoError(t, err)
	assert.Contains(t, l.Warning(), "not a directory")
	assert.Contains(t, l.Warning(), "running without it")
	assert.NoError(t, l.Close())
}

// TestHeld: status can tell a held state directory lock from a free one,
// and says it cannot tell without a lock file; asking leaves the lock
// free for the daemon.
func TestHeld(t *testing.T) {
	stateFile := filepath.Join(t.TempDir(), "state.json")
	_, known := Held(stateFile)
	assert.False(t, known, "no lock file")
	l, err := TryLock(stateFile)
	require.NoError(t, err)
	held, known := Held(stateFile)
	assert.True(t, known)
	assert.True(t, held)
	require.NoError(t, l.Close())
	held, known = Held(stateFile)
	assert.True(t, known)
	assert.False(t, held)
	l, err = TryLock(stateFile)
	require.NoError(t, err, "asking left the lock free")
	l.Close()
}

// TestCloseUnusedRemovesWhatTheLockCreated: a runtime-launched plugin
// locks its default state directory, then the runtime names another state
// file; letting the first lock go leaves no empty directory behind (a node
// kept an empty /var/lib/nri-cpupool with a lock file in it).
func TestCloseUnusedRemovesWhatTheLockCreated(t *testing.T) {
	base := t.TempDir()
	stateFile := filepath.Join(base, "a", "b", "state.json")
	l, err := TryLock(stateFile)
	require.NoError(t, err)
	require.FileExists(t, LockPath(stateFile))
	require.NoError(t, l.CloseUnused())
	assert.NoDirExists(t, filepath.Join(base, "a"), "the directories the lock made are gone")
	assert.DirExists(t, base, "what was there stays")

	again, err := TryLock(stateFile)
	require.NoError(t, err, "the path can be locked again")
	again.Close()
}

// TestCloseUnusedKeepsWhatWasThere: a directory or lock file that existed
// before the lock stays, and so does a directory something else was put in.
func TestCloseUnusedKeepsWhatWasThere(t *testing.T) {
	t.Run("an earlier lock file", func(t *testing.T) {
		stateFile := filepath.Join(t.TempDir(), "state.json")
		require.NoError(t, os.WriteFile(LockPath(stateFile), []byte("pid 1, since then\n"), 0o600))
		l, err := TryLock(stateFile)
		require.NoError(t, err)
		require.NoError(t, l.CloseUnused())
		assert.FileExists(t, LockPath(stateFile))
	})
	t.Run("an earlier directory", func(t *testing.T) {
		stateFile := filepath.Join(t.TempDir(), "state.json")
		l, err := TryLock(stateFile)
		require.NoError(t, err)
		require.NoError(t, l.CloseUnused())
		assert.NoFileExists(t, LockPath(stateFile), "the lock file it made goes")
		assert.DirExists(t, filepath.Dir(stateFile))
	})
	t.Run("a file put beside it", func(t *testing.T) {
		base := t.TempDir()
		stateFile := filepath.Join(base, "new", "state.json")
		l, err := TryLock(stateFile)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(stateFile, []byte("{}"), 0o600))
		require.NoError(t, l.CloseUnused())
		assert.FileExists(t, stateFile)
	})
}

// TestALockOnARemovedFileIsNotTaken: a process that opened the lock file
// before its holder removed it (CloseUnused) would lock a file no one else
// opens, beside the path's new one that a third process locks: two
// holders. It must find the file replaced and try again on the path.
func TestALockOnARemovedFileIsNotTaken(t *testing.T) {
	stateFile := filepath.Join(t.TempDir(), "s", "state.json")
	holder, err := TryLock(stateFile)
	require.NoError(t, err)
	waiter, err := os.OpenFile(LockPath(stateFile), os.O_RDWR, 0)
	require.NoError(t, err, "the waiter opened the file before it went")
	require.NoError(t, holder.CloseUnused())

	_, err = lockOpened(waiter, LockPath(stateFile), false, nil)
	require.ErrorIs(t, err, errReplaced)

	third, err := TryLock(stateFile)
	require.NoError(t, err, "the path's new file is free")
	defer third.Close()
	_, err = TryLock(stateFile)
	require.ErrorIs(t, err, ErrLocked, "and now held by one process only")
}

// TestTryLockIsNotRefusedByAStatusProbe: `nri-cpupool status` (and
// explain, status --json polled by scripts) asks Held, which takes a
// shared lock for an instant. TryLock is single-shot where no daemon runs
// (restore-host, a runtime-launched plugin moving its lock): a probe at
// that instant must not make it say "a daemon runs".
func TestTryLockIsNotRefusedByAStatusProbe(t *testing.T) {
	stateFile := filepath.Join(t.TempDir(), "state.json")
	l, err := TryLock(stateFile) // a daemon that ran and exited
	require.NoError(t, err)
	require.NoError(t, l.Close())
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // a script polling `status --json`
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				Held(stateFile)
			}
		}
	}()
	refused := 0
	for i := 0; i < 2000; i++ {
		l, err := TryLock(stateFile)
		if errors.Is(err, ErrLocked) {
			refused++
			continue
		}
		require.NoError(t, err)
		l.Close()
	}
	close(stop)
	<-done
	assert.Zero(t, refused, "no daemon runs, yet TryLock said ErrLocked while status probed the lock")
}
