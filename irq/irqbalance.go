package irq

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// IrqbalanceStatus is what the plugin did with irqbalance.
type IrqbalanceStatus struct {
	// PID is the irqbalance process last told, 0 if none was found.
	PID    int    `json:"pid,omitempty"`
	Socket string `json:"socket,omitempty"`
	// Told is the banned CPU list last sent, "NULL" for irqbalance's own.
	Told string `json:"told,omitempty"`
	// WithoutSocket is an irqbalance process found running without a
	// control socket: it may move IRQs back until the next rescan.
	WithoutSocket int `json:"withoutSocket,omitempty"`
}

// irqbalance tells a running irqbalance which CPUs to leave alone, through
// its control socket (see the package comment). It is used from the
// reconciler's goroutine only; mu guards the status for readers.
type irqbalance struct {
	cfg    Config
	log    *logrus.Logger
	mu     sync.Mutex
	st     IrqbalanceStatus
	warned map[int]bool
	// held is, by process, the banned list this process last set there:
	// what IrqbalancePath holds. irqbalance applies a list at its next
	// rebalance only (setup_banned_cpus), so asking it right after a
	// command would answer the list before.
	held map[int]string
	// unread are the processes whose answer to "setup" could not be
	// read, warned about once.
	unread map[int]bool
	// widened is the last list the Change's want widened to fit a
	// command, warned about once.
	widened string
}

func newIrqbalance(cfg Config, log *logrus.Logger) *irqbalance {
	return &irqbalance{cfg: cfg, log: log, warned: map[int]bool{}, held: map[int]string{}, unread: map[int]bool{}}
}

var socketName = regexp.MustCompile(`^irqbalance([0-9]{1,9})\.sock$`)

// maxMessage is the longest command every irqbalance 1.9 reads whole.
// sock_handle (irqbalance.c) reads a connection with one recvmsg into
// char buff[500] in 1.9.0 to 1.9.4, dropping the rest: a longer list
// would be cut mid-number, banning a prefix of the set and a CPU that
// is not in it. 1.9.5 reads up to 16383 bytes and refuses longer ones.
// Nothing tells the plugin which it talks to.
const maxMessage = 500

// setCPUs is the command that replaces irqbalance's banned CPUs.
const setCPUs = "settings cpus "

// fitBanList is the banned list to send as "settings cpus <list>": the
// set itself when its list (in ranges) fits in a command, else the
// smallest superset that fits, found by banning the CPUs of the shortest
// gaps between its ranges, and how many CPUs that adds. irqbalance's
// protocol has no other way: each "settings cpus" replaces the list the
// last one set (irqbalance.c, sock_handle), so a set cannot be sent in
// parts, and its parser takes numbers and ranges only (bitmap.c,
// __bitmap_parselist: no strides). Banning more than asked only keeps
// irqbalance from placing IRQs on the extra CPUs; banning less would let
// it move IRQs onto the CPUs kept free of them.
func fitBanList(set cpuset.CPUSet) (string, int) {
	room := maxMessage - len(setCPUs)
	if list := set.String(); len(list) <= room {
		return list, 0
	}
	cpus := set.List()
	type run struct{ first, last int }
	var runs []run
	for _, c := range cpus {
		if n := len(runs); n > 0 && runs[n-1].last == c-1 {
			runs[n-1].last = c
			continue
		}
		runs = append(runs, run{c, c})
	}
	// gaps[i] is the gap after runs[i]; the shortest are closed first,
	// the lower ones first among equals.
	gaps := make([]int, len(runs)-1)
	for i := range gaps {
		gaps[i] = i
	}
	slices.SortStableFunc(gaps, func(a, b int) int {
		return (runs[a+1].first - runs[a].last) - (runs[b+1].first - runs[b].last)
	})
	closing := func(k int) cpuset.CPUSet {
		closed := make([]bool, len(runs))
		for _, g := range gaps[:k] {
			closed[g] = true
		}
		out := make([]int, 0, len(cpus))
		for i, r := range runs {
			last := r.last
			if closed[i] {
				last = runs[i+1].first - 1
			}
			for c := r.first; c <= last; c++ {
				out = append(out, c)
			}
		}
		return cpuset.New(out...)
	}
	// Closing a gap never lengthens the list ("1,3" and "1-3" are as
	// long): the fewest closed gaps that fit are found by bisection.
	// Closing them all leaves one range, which always fits.
	lo, hi := 0, len(gaps)
	for lo < hi {
		mid := (lo + hi) / 2
		if len(closing(mid).String()) <= room {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	wider := closing(lo)
	return wider.String(), wider.Size() - set.Size()
}

// irqbalanceOrder is the Order of IrqbalancePath's change: below the
// IRQs' (0), so that irqbalance is told the ban before any IRQ is moved
// off the banned CPUs (it would move them back at its next rebalance),
// and gets its own set back only after every IRQ got its original.
const irqbalanceOrder = -1 << 20

// change is the Change of irqbalance's banned CPUs while banned is not
// empty: its original set (what it banned before the plugin told it
// anything, as the journal recorded it) plus banned.
func (b *irqbalance) change(banned cpuset.CPUSet) hostfiles.Change {
	return hostfiles.Change{
		Path:  IrqbalancePath,
		Order: irqbalanceOrder,
		Want: func(original string) (string, error) {
			orig, err := cpulist.Parse(original)
			if err != nil {
				return "", fmt.Errorf("irqbalance's recorded banned CPUs %s: %w", cpulist.Echo(original), err)
			}
			list, extra := fitBanList(orig.Union(banned))
			if extra > 0 && b.widened != list {
				b.widened = list
				b.log.Warnf("irqbalance: banned CPUs %s: its own plus those kept free of IRQs do not fit in the %d bytes of a command as a list, so %d CPUs between them are banned too; irqbalance places no IRQ on them", list, maxMessage, extra)
			}
			return list, nil
		},
		Satisfied: func(content, want string) bool {
			have, err1 := cpulist.Parse(content)
			w, err2 := cpulist.Parse(want)
			return err1 == nil && err2 == nil && have.Equals(w)
		},
	}
}

// identity names the irqbalance process the socket reaches now
// ("irqbalance<pid>"), "" when none runs: a restarted irqbalance
// computed its own set anew, and the recorded original of the old one
// is not its to get back (hostfiles.Identifier).
func (b *irqbalance) identity() string {
	pid, _, err := b.find()
	if err != nil || pid == 0 {
		return ""
	}
	return "irqbalance" + strconv.Itoa(pid)
}

// read is what IrqbalancePath holds: the CPUs the running irqbalance
// bans, as a list; ENOENT when no irqbalance with a socket runs (nothing
// to tell, nothing to restore).
func (b *irqbalance) read() ([]byte, error) {
	pid, sock, err := b.find()
	if err != nil {
		return nil, err
	}
	if pid == 0 {
		if !b.cfg.LeaveIrqbalance {
			b.warnWithoutSocket()
		}
		return nil, &fs.PathError{Op: "read", Path: IrqbalancePath, Err: syscall.ENOENT}
	}
	if held, ok := b.held[pid]; ok {
		return []byte(held), nil
	}
	// Asked: a ban set through its socket before the plugin (an
	// operator's irqbalance-ui, another agent) is part of what it bans,
	// and its environment does not say so.
	out, err := command(sock, "setup", true)
	if err != nil {
		return nil, fmt.Errorf("irqbalance (pid %d): asking for its banned CPUs through %s: %w", pid, sock, err)
	}
	banned, qerr := parseSetup(out)
	if qerr == nil {
		return []byte(banned.String()), nil
	}
	// An answer it cannot read: the set irqbalance computes by itself,
	// without a ban set through its socket before the plugin.
	own, err := b.ownBanned(pid)
	if err != nil {
		return nil, fmt.Errorf("irqbalance (pid %d): %w; and its environment: %w", pid, qerr, err)
	}
	if !b.unread[pid] {
		b.unread[pid] = true
		b.log.Warnf("irqbalance (pid %d): %v; taking its own banned CPUs (%s) from its environment: a ban set through its socket before the plugin is not given back", pid, qerr, own)
	}
	return []byte(own.String()), nil
}

// write tells the running irqbalance to ban the CPUs of list: "settings
// cpus NULL" when they are none or its own set (what it computes by
// itself), else the list. It sends nothing when that process was told
// the same already.
func (b *irqbalance) write(data []byte) error {
	set, err := cpulist.Parse(strings.TrimSpace(string(data)))
	if err != nil {
		return &fs.PathError{Op: "write", Path: IrqbalancePath, Err: syscall.EINVAL}
	}
	pid, sock, err := b.find()
	if err != nil {
		return err
	}
	if pid == 0 {
		return &fs.PathError{Op: "write", Path: IrqbalancePath, Err: syscall.ENOENT}
	}
	arg, extra := "NULL", 0
	if !set.IsEmpty() {
		if own, err := b.ownBanned(pid); err != nil || !own.Equals(set) {
			arg, extra = fitBanList(set)
		}
	}
	b.mu.Lock()
	same := b.st.PID == pid && b.st.Told == arg
	b.mu.Unlock()
	if !same {
		if _, err := command(sock, setCPUs+arg, false); err != nil {
			// irqbalance may have applied it all the same (it reads a
			// queued connection late, past the deadline): what it bans
			// is unknown now. Forget what this process last set, so
			// the next pass asks it ("setup") and sends again, whatever
			// the list, rather than trusting a cache that may say the
			// opposite of what irqbalance does.
			delete(b.held, pid)
			b.mu.Lock()
			if b.st.PID == pid {
				b.st.Told = ""
			}
			b.mu.Unlock()
			return fmt.Errorf("telling irqbalance (pid %d) to ban CPUs %s through %s: %w", pid, arg, sock, err)
		}
		b.mu.Lock()
		b.st.PID, b.st.Socket, b.st.Told = pid, sock, arg
		b.mu.Unlock()
		switch {
		case arg == "NULL":
			b.log.Infof("irqbalance (pid %d): banned CPUs back to its own (settings cpus NULL)", pid)
		case extra > 0:
			b.log.Warnf("irqbalance (pid %d): banned CPUs %s: the list does not fit in the %d bytes of a command otherwise, so %d CPUs between them are banned too; irqbalance places no IRQ on them", pid, arg, maxMessage, extra)
		default:
			b.log.Infof("irqbalance (pid %d): banned CPUs %s", pid, arg)
		}
	}
	b.held[pid] = set.String()
	return nil
}

// find returns the newest running irqbalance with a control socket; pid 0
// when there is none.
func (b *irqbalance) find() (int, string, error) {
	entries, err := os.ReadDir(b.cfg.IrqbalanceDir)
	if os.IsNotExist(err) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("looking for irqbalance's socket: %w", err)
	}
	best, sock := 0, ""
	for _, e := range entries {
		m := socketName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid > best && isIrqbalance(b.cfg.ProcRoot, pid) {
			best, sock = pid, filepath.Join(b.cfg.IrqbalanceDir, e.Name())
		}
	}
	return best, sock, nil
}

func isIrqbalance(procRoot string, pid int) bool {
	comm, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "comm"))
	return err == nil && strings.TrimSpace(string(comm)) == "irqbalance"
}

// warnWithoutSocket warns once per process about an irqbalance without a
// control socket (built without its UI, or its runtime directory missing).
func (b *irqbalance) warnWithoutSocket() {
	entries, err := os.ReadDir(b.cfg.ProcRoot)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !isIrqbalance(b.cfg.ProcRoot, pid) {
			continue
		}
		b.mu.Lock()
		b.st.WithoutSocket = pid
		b.mu.Unlock()
		if !b.warned[pid] {
			b.warned[pid] = true
			b.log.Warnf("irqbalance (pid %d) runs without a control socket in %s: it may move IRQs back onto CPUs kept free of them until the plugin's next rescan moves them off again; use an irqbalance built with its UI socket (Debian's is), or ban the exclusive pool's CPUs with IRQBALANCE_BANNED_CPULIST", pid, b.cfg.IrqbalanceDir)
		}
	}
}

// ownBanned is the set irqbalance bans by itself, computed as irqbalance
// 1.9 does (cputree.c, setup_banned_cpus): IRQBALANCE_BANNED_CPUS (a hex
// mask, deprecated but still honoured), else IRQBALANCE_BANNED_CPULIST,
// else the kernel's isolated and nohz_full CPUs. Thermal bans, which
// irqbalance adds itself, are not known here and are lost while the
// plugin's list is in force.
func (b *irqbalance) ownBanned(pid int) (cpuset.CPUSet, error) {
	environ, err := os.ReadFile(filepath.Join(b.cfg.ProcRoot, strconv.Itoa(pid), "environ"))
	if err != nil {
		return cpuset.New(), fmt.Errorf("reading its environment: %w", err)
	}
	env := map[string]string{}
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			env[k] = v
		}
	}
	if v := env["IRQBALANCE_BANNED_CPUS"]; v != "" {
		return ParseMask(v)
	}
	if v := env["IRQBALANCE_BANNED_CPULIST"]; v != "" {
		return cpulist.Parse(v)
	}
	own := cpuset.New()
	for _, name := range []string{"isolated", "nohz_full"} {
		data, err := os.ReadFile(filepath.Join(b.cfg.SysfsRoot, "sys/devices/system/cpu", name))
		if err != nil {
			continue
		}
		// nohz_full reads "(null)" on kernels built without it.
		if set, err := cpulist.Parse(string(data)); err == nil {
			own = own.Union(set)
		}
	}
	return own, nil
}

func (b *irqbalance) status() IrqbalanceStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st
}

// command sends one command to irqbalance's socket, with the credentials
// it insists on (root only), waits until irqbalance has handled it, and
// returns the reply if asked for one.
func command(sock, msg string, reply bool) (string, error) {
	if len(msg) > maxMessage {
		return "", fmt.Errorf("command of %d bytes; irqbalance reads at most %d", len(msg), maxMessage)
	}
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return "", err
	}
	creds := unix.UnixCredentials(&unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid())})
	if _, _, err := conn.WriteMsgUnix([]byte(msg), creds, nil); err != nil {
		return "", err
	}
	// irqbalance closes the connection once it has handled the command:
	// reading to the end waits for that, so the ban is in place (for its
	// next rebalance) before the caller writes IRQs.
	data, err := io.ReadAll(io.LimitReader(conn, 1<<20))
	if !reply {
		data = nil
	}
	return string(data), err
}

// QueryBanned asks a running irqbalance which CPUs it bans now ("setup";
// a change takes effect at its next rebalance, up to its sleep interval
// later). pid 0 means no irqbalance with a socket runs.
func QueryBanned(procRoot, irqbalanceDir string) (pid int, banned cpuset.CPUSet, err error) {
	b := &irqbalance{cfg: Config{ProcRoot: procRoot, IrqbalanceDir: irqbalanceDir}}
	pid, sock, err := b.find()
	if err != nil || pid == 0 {
		return pid, cpuset.New(), err
	}
	banned, err = queryBanned(sock)
	if err != nil {
		return pid, cpuset.New(), fmt.Errorf("irqbalance (pid %d): %w", pid, err)
	}
	return pid, banned, nil
}

// queryBanned sends "setup" and reads BANNED <mask> from the answer.
func queryBanned(sock string) (cpuset.CPUSet, error) {
	out, err := command(sock, "setup", true)
	if err != nil {
		return cpuset.New(), fmt.Errorf("asking through %s: %w", sock, err)
	}
	return parseSetup(out)
}

// parseSetup reads BANNED <mask> from irqbalance's answer to "setup"
// ("SLEEP <s> [IRQ <n> LOAD ... ]BANNED <mask>": irqbalance.c,
// sock_handle): the CPUs it bans now, as of its last rebalance.
func parseSetup(out string) (cpuset.CPUSet, error) {
	fields := strings.Fields(out)
	i := slices.Index(fields, "BANNED")
	if i < 0 || i+1 >= len(fields) {
		return cpuset.New(), fmt.Errorf("it answered %s, without BANNED", cpulist.Echo(out))
	}
	mask := fields[i+1]
	// irqbalance prints it into 512 bytes (cpumask_scnprintf), groups
	// of 8 hex digits: a longer mask (a ban above CPU ~1790 on a kernel
	// with NR_CPUS 4096) is cut mid-group and would read as another set.
	// Every group after the first is whole in a mask that
	// was not cut, and none is 511 bytes long (8+9k).
	if len(mask) >= maxBannedMask {
		return cpuset.New(), fmt.Errorf("its banned CPUs mask is %d bytes, cut at its %d-byte buffer", len(mask), maxBannedMask+1)
	}
	groups := strings.Split(mask, ",")
	for _, g := range groups[1:] {
		if len(g) != 8 {
			return cpuset.New(), fmt.Errorf("its banned CPUs mask %s has a group that is not 8 hex digits", cpulist.Echo(mask))
		}
	}
	return ParseMask(mask)
}

// maxBannedMask is the longest mask irqbalance's "setup" answer can
// carry: cpumask_scnprintf into 512 bytes, the last a NUL.
const maxBannedMask = 511
