// Package numamem counts the memory of NUMA nodes: what each node has, what
// each holder asks and holds of it, and whether a demand fits a set of
// nodes (docs/placement.md, "Memory follows the CPUs").
//
// It is an accumulator, like the kubelet's memory manager's state: the
// caller asks it one question per decision and tells it one thing per
// change, and it keeps the per-node accounts whole in between.
//
//   - Capacity (account.go): per node, MemTotal less its hugepage pools,
//     each hugepage size's nr_hugepages and free_hugepages as last read
//     (a reading replaces an older one, never a newer: KeepPages), and the
//     host's reserve of each (memory.reservedPerNode,
//     hugePagesReservedPerNode).
//   - Demand (demand.go): what a container asks (its memory limit and its
//     hugepage limits), and what a holder holds on each node (NodeMemory).
//   - The question (fit.go): Account.Fit works out, once per decision, what
//     a demand may have of each node; Fit.Fits tells whether a set of nodes
//     holds it, Fit.Split how it is taken from them, Fit.Shortage and
//     Fit.Refusal (refusal.go) what to tell the operator when none does.
//   - The change (account.go): Account.Set says that a holder (a
//     container, a hold, a claim's reservation) now holds this on these
//     nodes, replacing what it held: so nothing is counted twice, and a
//     count never goes negative (Verify checks both).
//   - DRA claims (claims.go): a prepared claim's memory is a holder of its
//     own, less what the container bound to it holds itself; MemoryOffer is
//     what the driver publishes.
//   - Reports (report.go): the figures status, the metrics and simulate
//     print, by the decision's own rule.
//
// It knows nothing of CPUs, pools or holds: a holder is an id, a set of
// nodes is a list of ids the caller chose (the nodes of its CPUs, of its
// plan), and who is bound to a claim is asked of the caller (Owners). It
// does no I/O: readings of the hugepage counts are handed to it.
package numamem
