package dra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"google.golang.org/grpc"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// NodeNameEnv is the environment variable the node name comes from when
// the config does not give it (the DaemonSet sets it from spec.nodeName).
const NodeNameEnv = "NODE_NAME"

// NodeName returns the configured node name, else $NODE_NAME.
func NodeName(configured string) string {
	if configured != "" {
		return configured
	}
	return os.Getenv(NodeNameEnv)
}

// NewClient connects to the API server: with the kubeconfig file at path
// (the systemd unit), or with the pod's service account when path is
// empty (the DaemonSet).
func NewClient(kubeconfig string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("DRA: in-cluster credentials: %w (outside a pod, set kubernetes.kubeconfig)", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return nil, fmt.Errorf("DRA: kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = "nri-cpupool"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("DRA: API client: %w", err)
	}
	return client, nil
}

// Paths are the kubelet's directories the driver serves in.
type Paths struct {
	// PluginDir holds the driver's own socket (dra.sock), below
	// /var/lib/kubelet/plugins/cpupool.dev.
	PluginDir string
	// RegistryDir is the kubelet's plugin registration directory
	// (/var/lib/kubelet/plugins_registry).
	RegistryDir string
}

// Serve registers the driver with the kubelet, serves its DRA gRPC API,
// publishes the ResourceSlices and keeps them current, and writes the
// claims file in the background, until ctx ends. Claims the driver
// remembers that no pod of this node can use any more are forgotten
// meanwhile, in the background (ForgetStale): their pods ended while
// nobody unprepared them.
//
// Serve never gives up before ctx ends, and returns only the error of the
// claims file's last write: the NRI side pins containers whatever the
// driver does, and a driver that stopped the daemon would stop pinning
// too (under systemd, a unit restarted every 2 s that trips the start
// limit and is left failed). Until the kubelet's plugin registration
// directory exists, which the kubelet makes when it starts (a node's
// first boot starts this daemon before the kubelet), the driver waits for
// it (StateWaitingForKubelet); any other failure to start the kubelet
// plugin is retried with backoff (StateRetrying). The driver does not
// make the registration directory itself: made under a kubelet root
// directory the kubelet does not use, it would leave the driver serving
// where nobody looks, which looks like success; waiting says what is
// missing, in the log, the metric and `nri-cpupool status`.
func (d *Driver) Serve(ctx context.Context, connect Connect, paths Paths) error {
	written := make(chan error, 1)
	go func() { written <- d.keepWritten(ctx) }()
	if client := d.connect(ctx, connect); client != nil {
		// In the background: an API server that does not answer must not
		// keep the driver from the kubelet, whose Unprepare needs none.
		forgot := make(chan struct{})
		go func() {
			defer close(forgot)
			d.ForgetStale(ctx, client)
		}()
		wait := d.retry.initial
		for ctx.Err() == nil {
			if d.serveKubelet(ctx, client, paths) {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(wait*2, d.retry.max)
		}
		<-forgot // its Gets end with ctx
	}
	err := <-written
	d.setState(StateStopped, "")
	return err
}

// Connect makes the API server's client: NewClient with the configured
// kubeconfig, in the daemon.
type Connect func() (kubernetes.Interface, error)

// connect makes the API client, trying again with backoff while it cannot
// (StateWaitingForCredentials), until ctx ends (nil). A kubeconfig that
// appears only when the node joins its cluster (kubeadm join writes the
// kubelet's) must not stop the daemon, which pins containers meanwhile.
// Making a client does not reach the API server: an unreachable one is
// waited for later, by each call that needs it.
func (d *Driver) connect(ctx context.Context, connect Connect) kubernetes.Interface {
	wait := d.retry.initial
	for ctx.Err() == nil {
		client, err := connect()
		if err == nil {
			return client
		}
		d.setState(StateWaitingForCredentials, err.Error())
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(wait*2, d.retry.max)
	}
	return nil
}

// serveKubelet starts the kubelet plugin and serves until ctx ends (true),
// or says why it cannot start (false): the caller tries again.
func (d *Driver) serveKubelet(ctx context.Context, client kubernetes.Interface, paths Paths) bool {
	if fi, err := os.Stat(paths.RegistryDir); err != nil || !fi.IsDir() {
		why := "it does not exist"
		if err == nil {
			why = "it is not a directory"
		} else if !errors.Is(err, os.ErrNotExist) {
			why = err.Error()
		}
		d.setState(StateWaitingForKubelet, fmt.Sprintf("the kubelet's plugin registration directory %s: %s; the kubelet makes it when it starts (if its root directory is not /var/lib/kubelet, set dra.registryDir and dra.pluginDir); containers are pinned meanwhile, and no claim is prepared", paths.RegistryDir, why))
		return false
	}
	// The driver's own directory is the driver's to make, once the
	// kubelet's directories show where they are.
	if err := os.MkdirAll(paths.PluginDir, 0o750); err != nil {
		d.setState(StateRetrying, fmt.Sprintf("making the driver's directory: %v", err))
		return false
	}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(DriverName),
		kubeletplugin.NodeName(d.nodeName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.PluginDataDirectoryPath(paths.PluginDir),
		kubeletplugin.RegistrarDirectoryPath(paths.RegistryDir),
		kubeletplugin.GRPCInterceptor(d.watchRegistration),
	)
	if err != nil {
		d.setState(StateRetrying, fmt.Sprintf("starting the kubelet plugin: %v", err))
		return false
	}
	defer helper.Stop()
	d.log.Infof("DRA driver %s on: node %s, socket %s/dra.sock, registered through %s", DriverName, d.nodeName, paths.PluginDir, paths.RegistryDir)
	d.setState(StateServing, "waiting for the kubelet to register the driver")
	d.Run(ctx, func(r resourceslice.DriverResources) error { return helper.PublishResources(ctx, r) })
	return true
}

// watchRegistration follows the kubelet's calls: its answer to the
// registration, and any DRA call, which only a kubelet that registered the
// driver makes.
func (d *Driver) watchRegistration(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	switch r := req.(type) {
	case *registerapi.RegistrationStatus:
		if r.PluginRegistered {
			d.setState(StateRegistered, "")
		} else {
			d.setState(StateServing, "the kubelet refused the registration: "+r.Error)
		}
	case *registerapi.InfoRequest:
	default:
		d.setState(StateRegistered, "")
	}
	return resp, err
}

// staleCheckTimeout bounds each claim's Get in ForgetStale: a claim
// whose check does not answer in time is kept, and the next is checked.
const staleCheckTimeout = 10 * time.Second

// ForgetStale releases the claims that no pod on this node can use any
// more, which the kubelet will never unprepare: their ResourceClaim is
// gone from the API server, or was replaced by another of the same name
// (for example after the node was down while their pods were deleted);
// or it is still there but deallocated, allocated from another node's
// pool, or reserved for no pod (a resourceClaimName claim outlives its
// pods, and an Unprepare whose write was lost to a kill -9 told the
// kubelet it was done). A claim that cannot be checked is kept.
//
// It runs beside Prepare and Unprepare (Serve starts it in the
// background): a claim is forgotten only if no Prepare recorded it again
// since it was checked.
func (d *Driver) ForgetStale(ctx context.Context, client kubernetes.Interface) {
	d.mu.Lock()
	checked := make(map[string]*Claim, len(d.claims))
	for uid, c := range d.claims {
		checked[uid] = c
	}
	d.mu.Unlock()
	stale := map[string]string{} // claim UID -> why
	for _, uid := range slices.Sorted(maps.Keys(checked)) {
		// Namespace and name never change in a record: no lock needed.
		c := checked[uid]
		get, cancel := context.WithTimeout(ctx, d.staleTimeout)
		got, err := client.ResourceV1().ResourceClaims(c.Namespace).Get(get, c.Name, metav1.GetOptions{})
		cancel()
		if ctx.Err() != nil {
			return
		}
		if apierrors.IsNotFound(err) {
			stale[uid] = "the API server no longer has it"
			continue
		}
		if err != nil {
			d.log.Warnf("DRA: checking claim %s/%s: %v; keeping it", c.Namespace, c.Name, err)
			continue
		}
		if why := d.unusable(uid, got); why != "" {
			stale[uid] = why
		}
	}
	d.forget(ctx, checked, stale)
}

// unusable says why no pod on this node can use the claim as the API
// server has it; empty when one may.
func (d *Driver) unusable(uid string, got *resourceapi.ResourceClaim) string {
	switch {
	case string(got.UID) != uid:
		return "the API server has another claim of that name (" + string(got.UID) + ")"
	case got.Status.Allocation == nil:
		return "it is deallocated"
	case len(reservedPods(got)) == 0:
		return "it is reserved for no pod"
	}
	for _, r := range got.Status.Allocation.Devices.Results {
		if r.Driver == DriverName && r.Pool == d.nodeName {
			return ""
		}
	}
	return "it is allocated no device of this node's pool " + d.nodeName
}

// forget unprepares the stale claims still recorded as they were checked:
// one a Prepare recorded since (a new record) is the kubelet's again.
func (d *Driver) forget(ctx context.Context, checked map[string]*Claim, stale map[string]string) {
	if len(stale) == 0 {
		return
	}
	d.prepareMu.Lock()
	defer d.prepareMu.Unlock()
	var refs []kubeletplugin.NamespacedObject
	d.mu.Lock()
	for _, uid := range slices.Sorted(maps.Keys(stale)) {
		c := checked[uid]
		if d.claims[uid] != c {
			continue
		}
		d.log.Infof("DRA: forgetting claim %s/%s (%s): %s", c.Namespace, c.Name, uid, stale[uid])
		refs = append(refs, kubeletplugin.NamespacedObject{UID: types.UID(uid), NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
	}
	d.mu.Unlock()
	if len(refs) == 0 {
		return
	}
	d.unprepareLocked(ctx, refs)
}
