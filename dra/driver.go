package dra

// The Driver itself: its state, how it is made from the claims file, and
// what the kubelet's plugin helper asks of it besides claims (HandleError).
// The rest by question: Prepare and Unprepare (prepare.go), reading what
// the scheduler allocated (allocation.go), the claim store and its file
// (store.go), publishing the slices (publish.go), binding containers to
// claims (bind.go), serving (start.go).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
)

// Driver is the DRA driver: it prepares and unprepares claims for the
// kubelet (kubeletplugin.DRAPlugin), tells the NRI plugin which claims a
// container shows (Bind), and computes the ResourceSlices.
//
// Locks: prepareMu serializes Prepare and Unprepare (they place and
// release) and is held while they call into Pools; mu guards the claims
// and is never held while calling out, so the plugin may call Bind under
// its own lock while a Prepare waits for that lock.
type Driver struct {
	pools    Pools
	nodeName string
	model    string
	cdiDir   string
	log      *logrus.Logger
	store    *store

	prepareMu sync.Mutex
	// saveFailures coalesces the log of Prepares failing to write the
	// claims file, cdiFailures of those failing to write a CDI spec;
	// under prepareMu.
	saveFailures, cdiFailures saveFailures
	// cdiFailing holds the UIDs of the claims whose last Prepare could
	// not write their CDI spec: cdiFailures ends ("written again") only
	// when none is left, not when another claim's spec is written.
	// Under prepareMu.
	cdiFailing map[string]struct{}
	// cdiWriteErrors counts the CDI specs Prepare could not write
	// (cpupool_dra_cdi_write_errors_total).
	cdiWriteErrors atomic.Uint64
	// unreported holds, by claim UID, what Prepares whose CDI specs could
	// not be written changed, for the one that writes it (see
	// prepareReport); under prepareMu.
	unreported map[string][]prepareReport

	mu      sync.Mutex
	claims  map[string]*Claim // by claim UID
	byToken map[string]tokenRef
	// claimed is every claim's CPUs (claims never share one).
	claimed cpuset.CPUSet
	// unconfirmed holds the UIDs of the claims loaded from the claims file
	// at start with requests marked unanswered (Request.Unanswered: a
	// Prepare the kubelet may never have been answered, a kill -9 before
	// its last look) whose record no Prepare has made again since
	// (setLocked ends it) and whose marks containers showing their tokens
	// have not all cleared since (Commit ends it: only a Prepare that
	// passed its last look shows a container a token). Their marked
	// requests no container is bound to do not beat a running container
	// (PreparedOn, running). A request loaded unmarked was answered: the
	// kubelet never prepares it again, and its CPUs stay its own.
	unconfirmed map[string]struct{}
	// placing is what the Prepares of a kubelet call placed, and what
	// their records from before gave up, not final yet (nil: none), for
	// PreparedOn (see placing.go).
	placing *placing
	// asked counts PreparedOn's "being prepared" answers: a running
	// container the plugin adopts on such CPUs holds them, and the last
	// look reads Held again when one came while it read it (settle).
	asked uint64
	// enc holds each claim's JSON for the file, made when it changes.
	enc map[string][]byte
	// gen counts the changes to claims, to order the copies that reach
	// the file.
	gen uint64
	// dirty wakes keepWritten (a binding to write), changed wakes Run
	// (slices to publish).
	dirty   chan struct{}
	changed chan struct{}
	// retry paces the writes that failed and the attempts to serve the
	// kubelet.
	retry retry
	// staleTimeout bounds each claim's check in ForgetStale
	// (staleCheckTimeout; tests shorten it).
	staleTimeout time.Duration

	// statusMu guards status, which Serve sets and metrics read.
	statusMu   sync.Mutex
	status     Status
	statusFile string

	// lost is the claims file found unusable at start, or the newest one
	// an earlier start set aside, whose claims the driver does not know;
	// nil when there was none. Set once by New.
	lost *lostClaims
	// dropped are the claims of the file load dropped alone, by their
	// requests' tokens (see store.load). Set once by New.
	dropped map[string]droppedClaim
}

// tokenRef locates a token's request.
type tokenRef struct{ claim, request string }

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// Options configure a Driver.
type Options struct {
	// NodeName is the Node this driver serves; its ResourceSlice pool
	// has that name, and allocations from other pools are refused.
	NodeName string
	// Model is the device model, ModelNUMANode (the default) or ModelCPU.
	Model string
	// ClaimsFile keeps the prepared claims (see ClaimsFile).
	ClaimsFile string
	// CDIDir is where the runtime reads CDI specs (/var/run/cdi).
	CDIDir string
	// StatusFile receives the driver's state at each change (see
	// StatusFile); empty: none.
	StatusFile string
	Log        *logrus.Logger
	// Discarded, if set, is called once by New when the claims file
	// could not be used (cpupool_files_discarded_total{file="dra-claims"}).
	Discarded func()
}

// New returns a driver with the claims its file remembers. Its errors are
// the configuration's only: a claims file that cannot be used starts the
// driver with no claims.
func New(p Pools, o Options) (*Driver, error) {
	if o.NodeName == "" {
		return nil, errors.New("DRA driver: no node name; set dra.nodeName or the NODE_NAME environment variable")
	}
	if o.Log == nil {
		o.Log = logrus.New()
	}
	switch o.Model {
	case "":
		o.Model = ModelNUMANode
	case ModelNUMANode, ModelCPU:
	default:
		return nil, fmt.Errorf("DRA driver: unknown device model %q; use %s", o.Model, strings.Join(Models(), " or "))
	}
	d := &Driver{pools: p, nodeName: o.NodeName, model: o.Model, cdiDir: o.CDIDir, log: o.Log, store: newStore(o.ClaimsFile), retry: defaultRetry, staleTimeout: staleCheckTimeout,
		byToken: map[string]tokenRef{}, claimed: cpuset.New(), enc: map[string][]byte{}, unconfirmed: map[string]struct{}{}, dirty: make(chan struct{}, 1), changed: make(chan struct{}, 1)}
	// A claims file that cannot be used never fails New:
	// the daemon would exit and pin nothing.
	claims, got, discarded := d.store.load(time.Now())
	for _, w := range got.warnings {
		d.log.Warn(w)
	}
	d.dropped = got.dropped
	if discarded != nil {
		d.lost = &lostClaims{at: discarded.At, file: discarded.Path, aside: discarded.Aside}
		d.log.Warnf("DRA claims %v; starting with no claims: the containers of the claims it held are refused until their pods are deleted", discarded)
		if o.Discarded != nil {
			o.Discarded()
		}
	} else if earlier := atomicfile.Newest(o.ClaimsFile); earlier != nil {
		// The kubelet may still hold claims an earlier process lost
		// (see lostClaims): their tokens are explained at every restart,
		// not only the first after the loss.
		d.lost = &lostClaims{at: earlier.At, file: earlier.Path, aside: earlier.Aside}
		d.log.Infof("DRA: the claims file was set aside at an earlier start at %s (%s): tokens of the claims it held are refused as lost; delete that file once no pod of them runs",
			earlier.At.UTC().Format(time.RFC3339), earlier.Aside)
	}
	d.claims = map[string]*Claim{}
	for _, uid := range slices.Sorted(maps.Keys(claims)) {
		c := claims[uid]
		d.logSharedLocked(uid, c)
		d.setLocked(uid, c)
		// Prepared before the restart: the memory is the claim's, as the
		// scheduler still counts it.
		d.reserveAll(uid, c)
	}
	for uid, c := range claims {
		if c.unanswered() {
			d.unconfirmed[uid] = struct{}{} // after setLocked, which ends it
		}
	}
	d.removeStaleCDISpecs()
	d.statusFile = o.StatusFile
	d.setState(StateStarting, "")
	// Said once, at start, in the log the node's operator reads: a claim
	// the API's limit keeps Pending never reaches this driver.
	topo, layout := p.Layout()
	if w := ClaimLimit(d.model, Offer(topo, layout, nil)); w != "" {
		d.log.Warnf("DRA: dra.devices: %s", w)
	}
	return d, nil
}

// HandleError implements kubeletplugin.DRAPlugin: errors of the background
// work (publishing slices, the gRPC servers) are logged; publishing
// retries by itself.
func (d *Driver) HandleError(_ context.Context, err error, msg string) {
	if errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.log.Warnf("DRA: %s: %v", msg, err)
		return
	}
	d.log.Errorf("DRA: %s: %v", msg, err)
}

// signal wakes Run without blocking: one pending signal covers any number
// of changes.
func (d *Driver) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
