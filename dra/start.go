package dra

import (
	"context"
	"fmt"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
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
			return nil, fmt.Errorf("DRA: in-cluster credentials: %w (outside a pod, set dra.kubeconfig)", err)
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
// publishes the ResourceSlices and keeps them current, until ctx ends.
// Claims the driver remembers that the API server no longer has are
// forgotten first: their pods ended while nobody unprepared them.
func (d *Driver) Serve(ctx context.Context, client kubernetes.Interface, paths Paths) error {
	// The kubelet makes its registration directory; the driver's own
	// directory is the driver's to make.
	if err := os.MkdirAll(paths.PluginDir, 0o750); err != nil {
		return fmt.Errorf("DRA: %w", err)
	}
	d.ForgetStale(ctx, client)
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(DriverName),
		kubeletplugin.NodeName(d.nodeName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.PluginDataDirectoryPath(paths.PluginDir),
		kubeletplugin.RegistrarDirectoryPath(paths.RegistryDir),
	)
	if err != nil {
		return fmt.Errorf("DRA: starting the kubelet plugin: %w", err)
	}
	defer helper.Stop()
	written := make(chan error, 1)
	go func() { written <- d.keepWritten(ctx) }()
	d.log.Infof("DRA driver %s on: node %s, socket %s/dra.sock, registered through %s", DriverName, d.nodeName, paths.PluginDir, paths.RegistryDir)
	d.Run(ctx, func(r resourceslice.DriverResources) error { return helper.PublishResources(ctx, r) })
	return <-written
}

// ForgetStale releases the claims whose ResourceClaim is gone from the API
// server (or was replaced by another of the same name): the kubelet will
// never unprepare them, for example after the node was down while their
// pods were deleted. A claim that cannot be checked is kept.
func (d *Driver) ForgetStale(ctx context.Context, client kubernetes.Interface) {
	var stale []kubeletplugin.NamespacedObject
	for uid, c := range d.Claims() {
		got, err := client.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			d.log.Warnf("DRA: checking claim %s/%s: %v; keeping it", c.Namespace, c.Name, err)
			continue
		case string(got.UID) == uid:
			continue
		}
		stale = append(stale, kubeletplugin.NamespacedObject{UID: types.UID(uid), NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
	}
	if len(stale) == 0 {
		return
	}
	d.log.Infof("DRA: forgetting %d claims the API server no longer has", len(stale))
	if _, err := d.UnprepareResourceClaims(ctx, stale); err != nil {
		d.log.Warnf("DRA: %v", err)
	}
}
