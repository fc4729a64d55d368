package config

import "slices"

// KernelWork says which kernel work, besides IRQs and host processes, is
// kept off the CPUs exclusive containers hold: the receive packet steering
// masks of network devices and the unbound workqueues' CPU masks. Each is
// off by default: a node's operator may have set these masks on purpose
// (OpenShift's performance profile limits rps_cpus to its reserved CPUs),
// and the plugin changes a host file only where asked (docs/tuning.md
// "Kernel work: RPS and workqueue masks").
type KernelWork struct {
	// ReceivePacketSteering: one of the KernelWork* values ("" is off).
	ReceivePacketSteering string `yaml:"receivePacketSteering"`
	// Workqueues: one of the KernelWork* values ("" is off).
	Workqueues string `yaml:"workqueues"`
}

const (
	// KernelWorkOff leaves the masks as they are (the default).
	KernelWorkOff = "off"
	// KernelWorkHeld removes the CPUs held by the containers (and holds)
	// of the exclusive pools from the masks, and gives them back at
	// release.
	KernelWorkHeld = "held"
)

// RPSHeld tells whether receive packet steering is kept off held CPUs.
func (c *Config) RPSHeld() bool { return c.KernelWork.ReceivePacketSteering == KernelWorkHeld }

// WorkqueuesHeld tells whether unbound workqueues are kept off held CPUs.
func (c *Config) WorkqueuesHeld() bool { return c.KernelWork.Workqueues == KernelWorkHeld }

// checkKernelWork validates kernelWork.*.
func (c *Config) checkKernelWork(p *Problems) {
	modes := []string{KernelWorkOff, KernelWorkHeld}
	for _, k := range []struct{ key, value string }{
		{"kernelWork.receivePacketSteering", c.KernelWork.ReceivePacketSteering},
		{"kernelWork.workqueues", c.KernelWork.Workqueues},
	} {
		if k.value != "" && !slices.Contains(modes, k.value) {
			p.Errorf(k.key, "%q is not one of off, held (held: remove the CPUs exclusive containers hold from these kernel masks, and put them back at release)", k.value)
		}
	}
}
