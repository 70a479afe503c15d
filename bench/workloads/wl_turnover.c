/*
 * wl_turnover.c — a key-value store whose survivors turn over: what a Redis
 * or Valkey server does to its allocator when nothing cooperates.
 *
 * The store is a chained hash table. Every key is three allocations, as in
 * Redis: an entry (next, key, value, slot: 32 bytes), the key's text ("k:" and
 * a number, 8..16 bytes) and its value (64..400 bytes, uniform), filled with
 * bytes drawn from the key's number. The program
 *
 *   fills it with N keys;
 *   deletes 9 keys in 10 picked at random (each key lookup walks its chain),
 *   then shrinks the table to the keys left, as Redis's dict does;
 *   turns the survivors over T times at a constant key count: deletes a
 *   random live key and sets a new one with a fresh 64..400-byte value;
 *   pauses P seconds (the allocator's background release has its chance).
 *
 * Figures: RSS / live bytes after the deletes (delete_ratio), at the end of
 * the turnover (turnover_ratio) and after the pause (settled_ratio). Live bytes
 * are the bytes asked of malloc still held (bucket array included), the
 * same for every allocator; RSS is /proc/self/statm's. A Redis server that
 * this pattern leaves at 5-12x its used_memory on the common allocators is
 * the case to beat (docs/benchmarks.md).
 * Self-check: every value is checked against its key's number when deleted,
 * and at the end every remaining one; the checksum covers them.
 *
 * Usage: wl-turnover [--quick] [--trace FILE] [keys=1000000] [turns=300000]
 *                    [pause_s=2] [seed=7]
 * Prints: wl-turnover ok delete_ratio=... turnover_ratio=... settled_ratio=...
 *         live_mib=... keys=N checksum=X
 */
#include "wl_common.h"

#define MIN_VALUE 64
#define MAX_VALUE 400
#define KEEP_ONE_IN 10

struct entry {
	struct entry *next;
	char *key;
	unsigned char *val;
	uint32_t slot;   /* index in the live array */
	uint32_t vlen;   /* value bytes */
	uint64_t number; /* the key's number: its text and its value's bytes */
};

struct store {
	struct entry **buckets;
	size_t nbuckets;     /* a power of two */
	struct entry **live; /* every key, for picking one at random */
	size_t nlive, cap;
};

static volatile size_t live_bytes; /* read by the tracer */

static uint64_t hash_key(const char *k)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *k; k++)
		h = (h ^ (unsigned char)*k) * 1099511628211ull;
	return h;
}

static unsigned char value_byte(uint64_t number, size_t i)
{
	return (unsigned char)(number * 131 + i * 7);
}

static void set_key(struct store *s, uint64_t number, wl_rng *rng)
{
	char text[24];
	int len = snprintf(text, sizeof(text), "k:%llu", (unsigned long long)number);
	struct entry *e = (struct entry *)wl_xmalloc(sizeof(*e));
	e->key = (char *)wl_xmalloc((size_t)len + 1);
	memcpy(e->key, text, (size_t)len + 1);
	e->vlen = (uint32_t)(MIN_VALUE + wl_below(rng, MAX_VALUE - MIN_VALUE + 1));
	e->val = (unsigned char *)wl_xmalloc(e->vlen);
	for (size_t i = 0; i < e->vlen; i++)
		e->val[i] = value_byte(number, i);
	e->number = number;
	struct entry **b = &s->buckets[hash_key(text) & (s->nbuckets - 1)];
	e->next = *b;
	*b = e;
	if (s->nlive == s->cap)
		wl_die("more keys than the live array holds");
	e->slot = (uint32_t)s->nlive;
	s->live[s->nlive++] = e;
	live_bytes += sizeof(*e) + (size_t)len + 1 + e->vlen;
}

/* Delete the key of live slot i, found through its chain as a lookup would;
 * returns its value's checksum. */
static uint64_t del_key(struct store *s, size_t i)
{
	struct entry *e = s->live[i];
	struct entry **pp = &s->buckets[hash_key(e->key) & (s->nbuckets - 1)];
	while (*pp != e) {
		if (*pp == NULL)
			wl_die("key %s is not in its chain", e->key);
		pp = &(*pp)->next;
	}
	*pp = e->next;
	uint64_t sum = e->number;
	for (size_t j = 0; j < e->vlen; j++) {
		if (e->val[j] != value_byte(e->number, j))
			wl_die("value of %s corrupted at byte %zu", e->key, j);
		sum += e->val[j];
	}
	live_bytes -= sizeof(*e) + strlen(e->key) + 1 + e->vlen;
	s->live[i] = s->live[--s->nlive];
	s->live[i]->slot = (uint32_t)i;
	free(e->val);
	free(e->key);
	free(e);
	return sum;
}

/* Rehash into n buckets (a power of two) and keep room for `cap` keys. */
static void resize(struct store *s, size_t n, size_t cap)
{
	struct entry **b = (struct entry **)calloc(n, sizeof(*b));
	struct entry **live = (struct entry **)realloc(s->live, cap * sizeof(*live));
	if (b == NULL || live == NULL)
		wl_die("resizing the table to %zu buckets failed", n);
	for (size_t i = 0; i < s->nlive; i++) {
		struct entry *e = live[i];
		struct entry **head = &b[hash_key(e->key) & (n - 1)];
		e->next = *head;
		*head = e;
	}
	live_bytes = live_bytes - s->nbuckets * sizeof(*b) - s->cap * sizeof(*live) +
	             n * sizeof(*b) + cap * sizeof(*live);
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = n;
	s->live = live;
	s->cap = cap;
}

static size_t pow2_at_least(size_t n)
{
	size_t p = 1;
	while (p < n)
		p *= 2;
	return p;
}

static double ratio_now(void)
{
	return (double)wl_rss_bytes() / (double)live_bytes;
}

int main(int argc, char **argv)
{
	struct wl_param params[] = {
	    {"keys", 1000000, 20000}, {"turns", 300000, 6000}, {"pause_s", 2, 0.2}, {"seed", 7, 7}};
	struct wl_args args = wl_parse(argc, argv, "wl-turnover", params, 4);
	size_t keys = (size_t)params[0].value, turns = (size_t)params[1].value;
	unsigned pause_ms = (unsigned)(params[2].value * 1000);
	wl_rng rng = wl_rng_seed((uint64_t)params[3].value);
	if (keys < KEEP_ONE_IN || keys > UINT32_MAX)
		wl_die("need %d <= keys <= %u", KEEP_ONE_IN, UINT32_MAX);

	struct store s = {0};
	s.nbuckets = pow2_at_least(keys);
	s.buckets = (struct entry **)calloc(s.nbuckets, sizeof(*s.buckets));
	s.cap = keys;
	s.live = (struct entry **)wl_xmalloc(s.cap * sizeof(*s.live));
	if (s.buckets == NULL)
		wl_die("calloc of %zu buckets failed", s.nbuckets);
	live_bytes = s.nbuckets * sizeof(*s.buckets) + s.cap * sizeof(*s.live);

	struct wl_tracer tr;
	wl_tracer_start(&tr, args.trace, &live_bytes);
	uint64_t next = 0, checksum = 0;
	while (next < keys)
		set_key(&s, next++, &rng);
	size_t keep = keys / KEEP_ONE_IN;
	while (s.nlive > keep)
		checksum += del_key(&s, (size_t)wl_below(&rng, s.nlive));
	resize(&s, pow2_at_least(keep), keep);
	double delete_ratio = ratio_now();
	for (size_t t = 0; t < turns; t++) {
		checksum += del_key(&s, (size_t)wl_below(&rng, s.nlive));
		set_key(&s, next++, &rng);
	}
	double turnover_ratio = ratio_now();
	wl_sleep_ms(pause_ms);
	double settled_ratio = ratio_now();
	double live_mib = (double)live_bytes / WL_MIB;
	while (s.nlive > 0)
		checksum += del_key(&s, s.nlive - 1);
	wl_tracer_stop(&tr);
	free(s.live);
	free(s.buckets);

	printf("wl-turnover ok delete_ratio=%.3f turnover_ratio=%.3f settled_ratio=%.3f "
	       "live_mib=%.1f keys=%llu checksum=%llx\n",
	       delete_ratio, turnover_ratio, settled_ratio, live_mib, (unsigned long long)next,
	       (unsigned long long)checksum);
	return 0;
}
