/*
 * test_numa_libnuma.c — the topology the page level reads for itself
 * (node.h: sysfs, because libnuma allocates and cannot run inside the
 * allocator's first call) is libnuma's: as many page heaps as libnuma has
 * nodes where there are several (one where there is one), each serving
 * exactly the CPUs libnuma puts on its node and preferring that node.
 *
 * Linked with libnuma (Debian's libnuma-dev); built without it where it
 * is missing, and then skipped (exit 77).
 */
#include <stdio.h>

#ifdef PA_HAVE_LIBNUMA
#include <numa.h>
#endif

#include "pagealloc.h"
#include "testutil.h"

#ifdef PA_HAVE_LIBNUMA

/* CPUs libnuma places on node n. */
static unsigned libnuma_cpus_of(int n)
{
	struct bitmask *m = numa_allocate_cpumask();
	assert_non_null(m);
	assert_int_equal(numa_node_to_cpus(n, m), 0);
	unsigned c = numa_bitmask_weight(m);
	numa_free_cpumask(m);
	return c;
}

static void heaps_follow_libnumas_nodes(void **state)
{
	(void)state;
	int nodes = numa_num_configured_nodes();
	assert_true(nodes >= 1);
	unsigned want = nodes > 1 && nodes <= 8 ? (unsigned)nodes : 1u;
	pa_free(pa_malloc(64)); /* the heap is built, with its split */
	TU_EQ(pa_numa_nodes(), want);
	struct pa_numa_stats s;
	if (want == 1) {
		/* One heap serves every CPU and binds nothing. */
		assert_int_equal(pa_numa_stats(0, &s), 0);
		TU_EQ(s.fake, 0);
		TU_EQ(s.bound_node, -1);
		TU_EQ(s.cpus, (unsigned)numa_num_configured_cpus());
		TU_EQ(libnuma_cpus_of(0), (unsigned)numa_num_configured_cpus());
		return;
	}
	for (unsigned n = 0; n < want; n++) {
		assert_int_equal(pa_numa_stats(n, &s), 0);
		TU_EQ(s.fake, 0);
		TU_EQ(s.bound_node, (int)n);
		TU_EQ(s.cpus, libnuma_cpus_of((int)n));
	}
}

int main(void)
{
	if (numa_available() < 0) {
		printf("libnuma: no NUMA support in this kernel\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    TU_TEST(heaps_follow_libnumas_nodes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void)
{
	printf("built without libnuma (libnuma-dev)\n");
	return 77;
}

#endif
