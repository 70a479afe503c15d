/*
 * node.c — reading the machine's nodes and choosing the split (node.h).
 *
 * sysfs lists nodes and CPUs as ranges ("0-3,8-11\n"). The files are small
 * and read into a buffer on the stack; nothing here allocates.
 */
#include "node.h"

#include <string.h>

#include "os.h"

/* Call fn(lo, hi, arg) for every range of a sysfs list; the number of
 * ranges, or -1 for a malformed list. */
static int list_each(const char *s, void (*fn)(unsigned lo, unsigned hi, void *arg), void *arg)
{
	int n = 0;
	while (*s != '\0' && *s != '\n') {
		unsigned lo = 0, hi;
		if (*s < '0' || *s > '9')
			return -1;
		for (; *s >= '0' && *s <= '9'; s++)
			lo = lo * 10 + (unsigned)(*s - '0');
		hi = lo;
		if (*s == '-') {
			s++;
			if (*s < '0' || *s > '9')
				return -1;
			for (hi = 0; *s >= '0' && *s <= '9'; s++)
				hi = hi * 10 + (unsigned)(*s - '0');
		}
		if (hi < lo || hi > 1u << 20)
			return -1;
		fn(lo, hi, arg);
		n++;
		if (*s == ',')
			s++;
	}
	return n;
}

struct online {
	unsigned count;
	unsigned ids[PA_NUMA_MAX_NODES];
	unsigned long mask;
};

static void online_add(unsigned lo, unsigned hi, void *arg)
{
	struct online *o = arg;
	for (unsigned n = lo; n <= hi; n++) {
		if (o->count < PA_NUMA_MAX_NODES)
			o->ids[o->count] = n;
		o->count++;
		if (n < 64)
			o->mask |= 1ul << n;
	}
}

struct cpus_of_node {
	struct pa_numa *t;
	uint8_t heap;
};

static void cpus_add(unsigned lo, unsigned hi, void *arg)
{
	struct cpus_of_node *c = arg;
	for (unsigned cpu = lo; cpu <= hi && cpu < PA_CACHE_MAX_CPUS; cpu++)
		c->t->node_of_cpu[cpu] = c->heap;
}

/* "/sys/devices/system/node/node<id>/cpulist" into buf. */
static void cpulist_path(char *buf, unsigned id)
{
	static const char head[] = "/sys/devices/system/node/node", tail[] = "/cpulist";
	char digits[12];
	int nd = 0;
	do
		digits[nd++] = (char)('0' + id % 10);
	while ((id /= 10) != 0);
	char *p = buf;
	memcpy(p, head, sizeof(head) - 1);
	p += sizeof(head) - 1;
	while (nd > 0)
		*p++ = digits[--nd];
	memcpy(p, tail, sizeof(tail));
}

/* Zero n bytes at p, writing only those that are not zero: memory never
 * written (the process's one struct pa_numa, in .bss) stays on the shared
 * zero page instead of becoming private pages of zeros. */
static void clear_unwritten(void *p, size_t n)
{
	unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i] != 0)
			b[i] = 0;
}

void node_topology(struct pa_numa *t, enum pa_numa_mode mode, unsigned fake)
{
	clear_unwritten(t, sizeof(*t));
	t->nodes = 1;
	for (unsigned i = 0; i < PA_NUMA_MAX_NODES; i++)
		t->bind_node[i] = -1;
	if (mode == PA_NUMA_OFF)
		return;
	char buf[512];
	struct online on = {0};
	if (os_read_file("/sys/devices/system/node/online", buf, sizeof(buf)) > 0 &&
	    list_each(buf, online_add, &on) > 0) {
		t->real_nodes = on.count;
		t->online_mask = on.mask;
	}
	if (mode == PA_NUMA_INTERLEAVE)
		return;
	if (fake != 0) {
		t->nodes = fake;
		t->fake = 1;
		for (unsigned cpu = 0; cpu < PA_CACHE_MAX_CPUS; cpu++)
			t->node_of_cpu[cpu] = (uint8_t)(cpu % fake);
		/* A pretend node that the machine has keeps its real policy. */
		for (unsigned i = 0; i < fake; i++)
			if (i < 64 && (on.mask >> i & 1))
				t->bind_node[i] = (int)i;
	} else {
		if (on.count < 2 || on.count > PA_NUMA_MAX_NODES)
			return;
		t->nodes = on.count;
		for (unsigned i = 0; i < on.count; i++) {
			t->bind_node[i] = (int)on.ids[i];
			cpulist_path(buf, on.ids[i]);
			char list[1024];
			struct cpus_of_node c = {t, (uint8_t)i};
			if (os_read_file(buf, list, sizeof(list)) > 0)
				list_each(list, cpus_add, &c);
		}
	}
	unsigned ncpus = os_possible_cpus();
	for (unsigned cpu = 0; cpu < PA_CACHE_MAX_CPUS && cpu < ncpus; cpu++)
		t->cpus_of[t->node_of_cpu[cpu]]++;
}
