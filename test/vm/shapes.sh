# Named VM shapes for test/vm/vm.sh. A shape sets the machine's topology and
# its kernel command line; the cgroup version is chosen separately (--cgroup).
# Add a shape by adding a shape_NAME function that sets every variable below.
# shellcheck shell=bash disable=SC2034

# SOCKETS CORES THREADS: -smp sockets × cores × threads (CPUs are numbered
#   socket by socket, core by core, thread by thread: CPU 0-1 are the two
#   threads of socket 0 core 0).
# NODES: NUMA nodes; sockets are split evenly between them (so NODES must
#   divide SOCKETS × CORES when a socket holds several nodes).
# MEM_PER_NODE: MiB of memory on each node.
# SHAPE_CMDLINE: extra kernel command line (isolcpus=, nohz_full=, ...).
# SHAPE_DOC: one line for --list.

# The production case: 2 sockets × 2 cores × 2 threads, one NUMA node per
# socket, and the second core of each socket isolated by the kernel (both of
# its hyper-threads), as a telco node would boot.
shape_prod() {
  SHAPE_DOC="2 sockets x 2 cores x 2 threads, 2 NUMA nodes, isolcpus=managed_irq,domain,2-3,6-7 nohz_full=2-3,6-7"
  SOCKETS=2 CORES=2 THREADS=2 NODES=2 MEM_PER_NODE=${VM_MEM_PER_NODE:-768}
  SHAPE_CMDLINE="isolcpus=managed_irq,domain,2-3,6-7 nohz_full=2-3,6-7 rcu_nocbs=2-3,6-7"
}

# The smallest machine, for checking the harness itself.
shape_tiny() {
  SHAPE_DOC="1 socket x 1 core x 2 threads, 1 NUMA node, no isolation"
  SOCKETS=1 CORES=1 THREADS=2 NODES=1 MEM_PER_NODE=${VM_MEM_PER_NODE:-512}
  SHAPE_CMDLINE=""
}

shape_names() { declare -F | sed -n 's/^declare -f shape_\([a-z0-9_]*\)$/\1/p' | grep -v '^names$'; }
