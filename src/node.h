/*
 * node.h — the machine's memory nodes as the page level sees them: how many
 * page heaps the default heap is split into, which CPU takes its pages from
 * which, where each heap lives and how its memory is placed.
 *
 * With numa=on (the default) and more than one node, pages.c builds one
 * page heap and one set of per-CPU page caches per node. Node i's heap
 * covers the i-th of `nodes` adjacent aligned windows of 2^PA_NUMA_WINDOW_BITS
 * bytes, reserved together at the build (os_reserve: where the kernel, or a
 * sanitizer's mmap, places them) and kept: the heap carves its arenas from
 * it, so the node of any heap page is (addr - base) >> window_bits,
 * arithmetic and no lookup. Every arena of a node's heap gets
 * MPOL_PREFERRED for its node before its first touch: the node first,
 * another when the node is full (the OOM killer is worse than a remote
 * page). A CPU's allocations come from its node's heap through its node's
 * caches; a free goes to the heap that owns the address, whatever CPU frees.
 *
 * One node (or numa=off, or an address-space limit, or more nodes than
 * PA_NUMA_MAX_NODES): one heap over the full window, no policy, exactly the
 * heap of a build without NUMA. numa=interleave: one heap whose arenas
 * interleave page by page over every node.
 *
 * numa_fake=N pretends the machine has N nodes, CPU c on node c % N, so
 * that the separation can be tested on a one-node machine; a pretend node
 * that exists (node 0 here) still gets its policy, the others none.
 *
 * The topology is read from sysfs (/sys/devices/system/node/online and each
 * node's cpulist), the files libnuma reads, with os_read_file: no malloc, no
 * stdio, so it can be read while the first malloc builds the heap.
 *
 * Set once at the build under pages.c's init lock, read-only after.
 */
#ifndef PA_NODE_H
#define PA_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "pagecache.h"

/* One node's window: 4 TiB, the most a node's heap holds (a node of a
 * larger machine than that would need a wider one). The summary tree of
 * such a window reserves 1/64 of a full one's (~9 MiB). Where the address
 * space has no room for them all (ThreadSanitizer's layout leaves ~1 TiB
 * to mmap), the windows halve, down to 64 GiB each. */
#define PA_NUMA_WINDOW_BITS 42u
#define PA_NUMA_WINDOW_MIN_BITS 36u

struct pa_numa {
	unsigned nodes;       /* page heaps: 1 unless split per node */
	unsigned real_nodes;  /* online nodes of the machine (0: not read) */
	int fake;             /* 1: the nodes are numa_fake's pretend ones */
	uintptr_t base;       /* the first node's window (0: one heap over the full window) */
	unsigned window_bits; /* each node's window is 2^window_bits bytes */
	/* The node each heap binds to (its number on the machine), or -1: none. */
	int bind_node[PA_NUMA_MAX_NODES];
	unsigned long online_mask;           /* online nodes below 64 (interleave) */
	unsigned cpus_of[PA_NUMA_MAX_NODES]; /* CPU ids mapped to each heap */
	/* The heap of each CPU id: CPUs past the table, or in no node's
	 * cpulist, take node 0's. Last, and written only where not 0: with one
	 * node the 4 KiB table stays on the zero page, out of the RSS. */
	uint8_t node_of_cpu[PA_CACHE_MAX_CPUS];
};

/* Read the topology and decide the split for mode and numa_fake (0: the
 * machine's own nodes). Never allocates. Leaves t->nodes == 1 unless more
 * than one heap is wanted and possible; the windows are the caller's. */
void node_topology(struct pa_numa *t, enum pa_numa_mode mode, unsigned fake);

/* The heap that owns addr: its node index, or -1 outside every window
 * (with one heap: 0, which checks the address itself). */
static inline int node_of_addr(const struct pa_numa *t, uintptr_t addr)
{
	if (t->nodes == 1)
		return 0;
	uintptr_t i = (addr - t->base) >> t->window_bits;
	return i < t->nodes ? (int)i : -1;
}

/* The heap of CPU id cpu (-1, unknown: node 0). */
static inline unsigned node_of_cpu(const struct pa_numa *t, int cpu)
{
	return (unsigned)cpu < PA_CACHE_MAX_CPUS ? t->node_of_cpu[cpu] : 0;
}

#endif
