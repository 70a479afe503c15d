/*
 * fuzz_conf.c — libFuzzer target: the input is a PAGEALLOC_CONF string.
 *
 * The parser under test is config_apply (src/config.c), the function
 * PAGEALLOC_CONF, pa_config and pa_config_set all reach. It writes the
 * process's configuration, pa_conf; this program never builds a heap, so it
 * saves pa_conf's defaults once and puts them back before and after every
 * input.
 *
 * Every input is applied twice:
 *  1. entry by entry (split at commas, up to the first NUL, as config_apply
 *     splits), each through config_apply on its own. An entry the reference
 *     below accepts must be accepted, change exactly its key's field to the
 *     reference's value, and print nothing. Any other non-empty entry must be
 *     refused with exactly one warning line (one write, "pagealloc: ...\n",
 *     no other control character) and leave pa_conf as it was. An empty
 *     entry (",,", a trailing comma) is neither. An entry with an '=' goes
 *     through pa_config_set(key, value) too, which must do the same (and
 *     return -1 with errno EINVAL where it refuses).
 *  2. whole, through pa_config: the same number refused (errno EINVAL when
 *     any was), one line each, and the same configuration as step 1 ended
 *     with. Then every field is checked against its documented range.
 * Last, config_parse_size runs on the raw bytes (not NUL-terminated: a read
 * past the end is an ASan report) and must agree with the reference.
 *
 * The reference is written from the documentation (README.md's
 * configuration table, include/pagealloc.h, the warnings' "expected ..."
 * texts), not from config.c: the key table below, and a size grammar of
 * digits and one suffix from a list. A disagreement, a crash, a sanitizer
 * report or a broken invariant aborts, and libFuzzer keeps the input.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "layout.h"
#include "pagealloc.h"

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_conf: %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* ---- the warnings config.c writes ---------------------------------------------------- */

/* The link wraps os_write_stderr (fuzz.cmake), so every message the library
 * writes arrives here instead of on stderr. */
void __wrap_os_write_stderr(const char *buf, size_t len);

static struct {
	size_t writes;   /* os_write_stderr calls */
	size_t bad;      /* writes that were not one warning line */
	char last[1024]; /* the last one, for failure reports */
} warnings;

static const char warn_prefix[] = "pagealloc: ";

void __wrap_os_write_stderr(const char *buf, size_t len)
{
	warnings.writes++;
	size_t n = len < sizeof(warnings.last) - 1 ? len : sizeof(warnings.last) - 1;
	memcpy(warnings.last, buf, n);
	warnings.last[n] = '\0';
	int one_line = len > strlen(warn_prefix) && buf[len - 1] == '\n' &&
	               memcmp(buf, warn_prefix, strlen(warn_prefix)) == 0;
	for (size_t i = 0; one_line && i + 1 < len; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			one_line = 0;
	if (!one_line)
		warnings.bad++;
}

/* ---- the reference: keys and values as documented ---------------------------------- */

/* REF_LIMIT: a REF_SIZE up to max, or the word "auto", stored as SIZE_MAX. */
enum ref_type { REF_SIZE, REF_WORD, REF_UINT, REF_PATH, REF_LIMIT };

struct ref_key {
	const char *name;
	enum ref_type type;
	size_t offset;
	size_t min, max;      /* REF_SIZE: min; REF_UINT, REF_LIMIT: [min, max] */
	const char *words[6]; /* REF_WORD: the value stored is the word's index */
};

#define FIELD(f) offsetof(struct pa_config, f)
static const struct ref_key ref_keys[] = {
    {"arena_size", REF_SIZE, FIELD(arena_size), (size_t)4 << 20, SIZE_MAX, {NULL}},
    {"percpu_cache", REF_WORD, FIELD(percpu_cache), 0, 0, {"off", "locked", "on", NULL}},
    {"scavenger", REF_WORD, FIELD(scavenger), 0, 0, {"off", "on", NULL}},
    {"scavenge_percent", REF_UINT, FIELD(scavenge_percent), 1, 100, {NULL}},
    {"release", REF_WORD, FIELD(release), 0, 0, {"dontneed", "free", NULL}},
    {"memory_limit", REF_LIMIT, FIELD(memory_limit), 0, SIZE_MAX - 1, {NULL}},
    {"memory_limit_hard", REF_SIZE, FIELD(memory_limit_hard), 0, SIZE_MAX, {NULL}},
    {"scavenge_delay_ms", REF_UINT, FIELD(scavenge_delay_ms), 0, 3600000, {NULL}},
    {"thread_cache", REF_WORD, FIELD(thread_cache), 0, 0, {"off", "on", NULL}},
    {"scavenge_burst_percent", REF_UINT, FIELD(scavenge_burst_percent), 1, 100, {NULL}},
    {"thread_cache_total", REF_SIZE, FIELD(thread_cache_total), 0, SIZE_MAX, {NULL}},
    {"stats_print", REF_WORD, FIELD(stats_print), 0, 0, {"off", "on", NULL}},
    {"stats_file", REF_PATH, FIELD(stats_file), 0, PA_CONF_PATH_MAX - 1, {NULL}},
    {"prof", REF_WORD, FIELD(prof), 0, 0, {"off", "on", NULL}},
    {"prof_sample", REF_SIZE, FIELD(prof_sample), 1, SIZE_MAX, {NULL}},
    {"prof_interval", REF_SIZE, FIELD(prof_interval), 0, SIZE_MAX, {NULL}},
    {"prof_signal",
     REF_WORD,
     FIELD(prof_signal),
     0,
     0,
     {"off", "SIGUSR1", "SIGUSR2", "SIGHUP", NULL}},
    {"prof_prefix", REF_PATH, FIELD(prof_prefix), 0, PA_CONF_PATH_MAX - 1, {NULL}},
    {"guard_sample", REF_UINT, FIELD(guard_sample), 0, 1000000000, {NULL}},
    {"guard_max", REF_SIZE, FIELD(guard_max), 1, SIZE_MAX, {NULL}},
    {"guard_underflow", REF_WORD, FIELD(guard_underflow), 0, 0, {"off", "on", NULL}},
    {"live", REF_WORD, FIELD(live), 0, 0, {"off", "on", NULL}},
    {"map_prefix", REF_PATH, FIELD(map_prefix), 0, PA_CONF_PATH_MAX - 1, {NULL}},
    {"numa", REF_WORD, FIELD(numa), 0, 0, {"off", "on", "interleave", NULL}},
    {"numa_fake", REF_UINT, FIELD(numa_fake), 0, 8, {NULL}},
    {"thp", REF_WORD, FIELD(thp), 0, 0, {"off", "auto", "always", NULL}},
};

/* A REF_PATH key's string in c. */
static char *path_of(struct pa_config *c, const struct ref_key *k)
{
	return (char *)c + k->offset;
}
#define NKEYS (sizeof(ref_keys) / sizeof(ref_keys[0]))

static size_t *field_of(struct pa_config *c, const struct ref_key *k)
{
	return (size_t *)((char *)c + k->offset);
}

static size_t value_of(const struct pa_config *c, const struct ref_key *k)
{
	return *(const size_t *)((const char *)c + k->offset);
}

/* Decimal digits s[0, len) (at least one) into *v; 0, or -1 past SIZE_MAX
 * or on anything else. */
static int ref_decimal(const char *s, size_t len, size_t *v)
{
	size_t x = 0;
	if (len == 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (__builtin_mul_overflow(x, 10, &x) ||
		    __builtin_add_overflow(x, (size_t)(s[i] - '0'), &x))
			return -1;
	}
	*v = x;
	return 0;
}

/* A size: digits, then one of these suffixes (nothing, a byte "B", or a
 * binary multiplier K, M, G, T in either case, optionally followed by "i",
 * "B" or "iB"), the product within size_t. */
static int ref_size(const char *s, size_t len, size_t *out)
{
	static const struct {
		const char *text;
		unsigned shift;
	} suffixes[] = {
	    {"", 0},     {"b", 0},    {"B", 0},    {"k", 10},  {"K", 10},  {"ki", 10},
	    {"Ki", 10},  {"kb", 10},  {"Kb", 10},  {"kB", 10}, {"KB", 10}, {"kib", 10},
	    {"Kib", 10}, {"kiB", 10}, {"KiB", 10}, {"m", 20},  {"M", 20},  {"mi", 20},
	    {"Mi", 20},  {"mb", 20},  {"Mb", 20},  {"mB", 20}, {"MB", 20}, {"mib", 20},
	    {"Mib", 20}, {"miB", 20}, {"MiB", 20}, {"g", 30},  {"G", 30},  {"gi", 30},
	    {"Gi", 30},  {"gb", 30},  {"Gb", 30},  {"gB", 30}, {"GB", 30}, {"gib", 30},
	    {"Gib", 30}, {"giB", 30}, {"GiB", 30}, {"t", 40},  {"T", 40},  {"ti", 40},
	    {"Ti", 40},  {"tb", 40},  {"Tb", 40},  {"tB", 40}, {"TB", 40}, {"tib", 40},
	    {"Tib", 40}, {"tiB", 40}, {"TiB", 40},
	};
	size_t digits = 0;
	while (digits < len && s[digits] >= '0' && s[digits] <= '9')
		digits++;
	size_t v;
	if (ref_decimal(s, digits, &v) != 0)
		return -1;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t n = strlen(suffixes[i].text);
		if (n != len - digits || memcmp(suffixes[i].text, s + digits, n) != 0)
			continue;
		if (v > (SIZE_MAX >> suffixes[i].shift))
			return -1;
		*out = v << suffixes[i].shift;
		return 0;
	}
	return -1;
}

/* Apply entry[0, len) (no comma) to *c as the documentation says; 1 if it
 * is accepted, 0 if it must be refused (and *c is untouched). */
static int ref_apply(struct pa_config *c, const char *entry, size_t len)
{
	const char *eq = memchr(entry, '=', len);
	if (eq == NULL)
		return 0;
	size_t klen = (size_t)(eq - entry), vlen = len - klen - 1;
	const char *value = eq + 1;
	for (size_t i = 0; i < NKEYS; i++) {
		const struct ref_key *k = &ref_keys[i];
		if (strlen(k->name) != klen || memcmp(k->name, entry, klen) != 0)
			continue;
		size_t v;
		switch (k->type) {
		case REF_PATH:
			if (vlen > k->max)
				return 0;
			memcpy(path_of(c, k), value, vlen);
			path_of(c, k)[vlen] = '\0';
			return 1;
		case REF_WORD:
			for (size_t w = 0; k->words[w] != NULL; w++) {
				if (strlen(k->words[w]) == vlen &&
				    memcmp(k->words[w], value, vlen) == 0) {
					*field_of(c, k) = w;
					return 1;
				}
			}
			return 0;
		case REF_UINT:
			if (ref_decimal(value, vlen, &v) != 0 || v < k->min || v > k->max)
				return 0;
			*field_of(c, k) = v;
			return 1;
		case REF_SIZE:
			if (ref_size(value, vlen, &v) != 0 || v < k->min)
				return 0;
			*field_of(c, k) = v;
			return 1;
		case REF_LIMIT:
			if (vlen == 4 && memcmp(value, "auto", 4) == 0) {
				*field_of(c, k) = SIZE_MAX;
				return 1;
			}
			if (ref_size(value, vlen, &v) != 0 || v < k->min || v > k->max)
				return 0;
			*field_of(c, k) = v;
			return 1;
		}
	}
	return 0;
}

/* ---- comparing configurations ------------------------------------------------------- */

/* The first key whose value differs between a and b, or NULL. */
static const char *first_difference(const struct pa_config *a, const struct pa_config *b)
{
	for (size_t i = 0; i < NKEYS; i++) {
		const struct ref_key *k = &ref_keys[i];
		if (k->type == REF_PATH) {
			const char *pa = path_of((struct pa_config *)a, k);
			const char *pb = path_of((struct pa_config *)b, k);
			if (memchr(pa, '\0', PA_CONF_PATH_MAX) == NULL ||
			    memchr(pb, '\0', PA_CONF_PATH_MAX) == NULL || strcmp(pa, pb) != 0)
				return k->name;
		} else if (value_of(a, k) != value_of(b, k)) {
			return k->name;
		}
	}
	return NULL;
}

/* Every field within its documented range. */
static void check_ranges(const struct pa_config *c)
{
	for (size_t i = 0; i < NKEYS; i++) {
		const struct ref_key *k = &ref_keys[i];
		size_t v = k->type == REF_PATH ? 0 : value_of(c, k);
		size_t words = 0;
		switch (k->type) {
		case REF_PATH:
			CHECK(memchr(path_of((struct pa_config *)c, k), '\0', PA_CONF_PATH_MAX) !=
			          NULL,
			      "%s is not a string", k->name);
			break;
		case REF_WORD:
			while (k->words[words] != NULL)
				words++;
			CHECK(v < words, "%s = %zu, not one of its %zu words", k->name, v, words);
			break;
		case REF_LIMIT:
			if (v == SIZE_MAX) /* auto */
				break;
			/* fallthrough */
		case REF_UINT:
		case REF_SIZE:
			CHECK(v >= k->min && v <= k->max, "%s = %zu outside [%zu, %zu]", k->name, v,
			      k->min, k->max);
			break;
		}
	}
}

/* ---- the target ----------------------------------------------------------------------- */

static struct pa_config defaults;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	defaults = pa_conf;
	check_ranges(&defaults);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The string config_apply sees: the input up to its first NUL. */
	char *conf = malloc(size + 1);
	memcpy(conf, data, size);
	conf[size] = '\0';
	size_t conf_len = strlen(conf);

	/* 1. Entry by entry. */
	pa_conf = defaults;
	int refused = 0;
	for (size_t at = 0; at <= conf_len;) {
		const char *comma = memchr(conf + at, ',', conf_len - at);
		size_t len = comma != NULL ? (size_t)(comma - (conf + at)) : conf_len - at;
		char *entry = malloc(len + 1); /* exactly the entry: ASan sees a read past it */
		memcpy(entry, conf + at, len);
		entry[len] = '\0';

		struct pa_config before = pa_conf, want = pa_conf;
		int accept = len > 0 && ref_apply(&want, entry, len);
		warnings.writes = warnings.bad = 0;
		int r = config_apply(entry, "fuzz");
		const char *diff = first_difference(&pa_conf, &want);
		if (len == 0) {
			CHECK(r == 0 && warnings.writes == 0, "empty entry: %d refused", r);
		} else if (accept) {
			CHECK(r == 0, "'%s' refused, the documentation accepts it: %s", entry,
			      warnings.last);
			CHECK(warnings.writes == 0, "'%s' accepted with a warning: %s", entry,
			      warnings.last);
			CHECK(diff == NULL, "'%s' set %s otherwise than documented", entry, diff);
		} else {
			CHECK(r == 1, "'%s' accepted, the documentation refuses it", entry);
			CHECK(warnings.writes == 1 && warnings.bad == 0,
			      "'%s' refused with %zu writes, %zu not one line; last: %s", entry,
			      warnings.writes, warnings.bad, warnings.last);
			CHECK(first_difference(&pa_conf, &before) == NULL,
			      "refused '%s' changed %s", entry,
			      first_difference(&pa_conf, &before));
		}
		struct pa_config after = pa_conf;

		char *eq = strchr(entry, '=');
		if (eq != NULL) {
			*eq = '\0'; /* entry is the key, eq + 1 the value */
			pa_conf = before;
			warnings.writes = warnings.bad = 0;
			errno = 0;
			int rc = pa_config_set(entry, eq + 1);
			CHECK(rc == (r ? -1 : 0) && (rc == 0 || errno == EINVAL),
			      "pa_config_set('%s', '%s') = %d (errno %d), config_apply refused %d",
			      entry, eq + 1, rc, errno, r);
			CHECK(warnings.writes == (size_t)r && warnings.bad == 0,
			      "pa_config_set('%s', '%s'): %zu warnings, %zu not one line", entry,
			      eq + 1, warnings.writes, warnings.bad);
			CHECK(first_difference(&pa_conf, &after) == NULL,
			      "pa_config_set('%s', '%s') and config_apply differ in %s", entry,
			      eq + 1, first_difference(&pa_conf, &after));
			pa_conf = after;
		}
		refused += r;
		free(entry);
		if (comma == NULL)
			break;
		at += len + 1;
	}
	struct pa_config entry_by_entry = pa_conf;

	/* 2. Whole, through the public entry point. */
	pa_conf = defaults;
	warnings.writes = warnings.bad = 0;
	errno = 0;
	int whole = pa_config(conf);
	CHECK(whole == refused, "pa_config refused %d entries, one by one %d", whole, refused);
	CHECK(whole == 0 || errno == EINVAL, "pa_config refused %d, errno %d", whole, errno);
	CHECK(warnings.writes == (size_t)whole && warnings.bad == 0,
	      "%d refused, %zu warnings, %zu not one line", whole, warnings.writes, warnings.bad);
	CHECK(first_difference(&pa_conf, &entry_by_entry) == NULL,
	      "whole and entry by entry differ in %s", first_difference(&pa_conf, &entry_by_entry));
	check_ranges(&pa_conf);
	pa_conf = defaults;
	free(conf);

	/* 3. The size parser on the raw bytes. */
	size_t got = 0, want = 0;
	int rc = config_parse_size((const char *)data, size, &got);
	int ref = ref_size((const char *)data, size, &want);
	CHECK(rc == ref, "config_parse_size says %d, the reference %d", rc, ref);
	CHECK(rc != 0 || got == want, "config_parse_size: %zu, the reference %zu", got, want);
	return 0;
}
