/*
 * config.c — PAGEALLOC_CONF and pa_config_set.
 */
#include "config.h"
#include "os.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layout.h"
#include "msg.h"
#include "pagealloc.h"

struct pa_config pa_conf = {
    .arena_size = PA_ARENA_DEFAULT,
    .percpu_cache = PA_CACHE_RSEQ,
    .scavenger = 1,
    .scavenge_percent = 1,
    .release = 0,
    .memory_limit = 0,
    .scavenge_delay_ms = 1000,
    .thread_cache = 1,
    .scavenge_burst_percent = 10,
    .thread_cache_total = (size_t)16 << 20,
    .prof = 1,
    .prof_sample = (size_t)512 << 10,
    .guard_max = (size_t)64 << 10,
    .live = 1,
    .numa = 1,
    .thp = 1,
};

void (*config_on_change)(void);

enum conf_type {
	CONF_SIZE,  /* a size with an optional K/M/G/T suffix, at least `min` */
	CONF_ENUM,  /* one of `names`; the value stored is its index */
	CONF_UINT,  /* a decimal number in [min, max] */
	CONF_PATH,  /* a file name (no commas), kept as a string */
	CONF_LIMIT, /* a CONF_SIZE, or "auto" (stored as PA_MEMORY_LIMIT_AUTO) */
};

struct conf_key {
	const char *name;
	enum conf_type type;
	size_t offset;
	size_t min;               /* CONF_SIZE, CONF_UINT: smallest accepted value */
	size_t max;               /* CONF_UINT: largest accepted value */
	const char *const *names; /* CONF_ENUM: accepted words, NULL-terminated */
	const char *expect;       /* what a good value looks like, for warnings */
};

/* Indexed by enum pa_cache_mode. */
static const char *const cache_modes[] = {"off", "locked", "on", NULL};
static const char *const on_off[] = {"off", "on", NULL};
static const char *const release_modes[] = {"dontneed", "free", NULL};
/* Indexed by enum pa_numa_mode (layout.h). */
static const char *const numa_modes[] = {"off", "on", "interleave", NULL};
/* Indexed by enum pa_thp_conf (scavenger.h). */
static const char *const thp_modes[] = {"off", "auto", "always", NULL};
/* Indexed as prof.c's prof_signals. */
static const char *const prof_signal_names[] = {"off", "SIGUSR1", "SIGUSR2", "SIGHUP", NULL};

#define KEY(name, type, min, max, names, expect)                                                   \
	{                                                                                          \
#name, type, offsetof(struct pa_config, name), min, max, names, expect             \
	}
static const struct conf_key conf_keys[] = {
    KEY(arena_size, CONF_SIZE, PA_CHUNK_SIZE, 0, NULL, "a size of at least 4M such as 64M or 1G"),
    KEY(percpu_cache, CONF_ENUM, 0, 0, cache_modes, "on, off or locked"),
    KEY(scavenger, CONF_ENUM, 0, 0, on_off, "on or off"),
    KEY(scavenge_percent, CONF_UINT, 1, 100, NULL, "a whole percentage from 1 to 100"),
    KEY(release, CONF_ENUM, 0, 0, release_modes, "dontneed or free"),
    KEY(memory_limit, CONF_LIMIT, 0, 0, NULL,
        "a size such as 2G, 0 for none, or auto for the container's"),
    KEY(memory_limit_hard, CONF_SIZE, 0, 0, NULL, "a size such as 2G, or 0 for none"),
    KEY(scavenge_delay_ms, CONF_UINT, 0, 3600000, NULL, "milliseconds from 0 to 3600000"),
    KEY(thread_cache, CONF_ENUM, 0, 0, on_off, "on or off"),
    KEY(scavenge_burst_percent, CONF_UINT, 1, 100, NULL, "a whole percentage from 1 to 100"),
    KEY(thread_cache_total, CONF_SIZE, 0, 0, NULL, "a size such as 4M"),
    KEY(stats_print, CONF_ENUM, 0, 0, on_off, "on or off"),
    KEY(stats_file, CONF_PATH, 0, 0, NULL, "a file name shorter than 256 bytes"),
    KEY(prof, CONF_ENUM, 0, 0, on_off, "on or off"),
    KEY(prof_sample, CONF_SIZE, 1, 0, NULL, "a size of at least 1 such as 512K"),
    KEY(prof_interval, CONF_SIZE, 0, 0, NULL, "a size such as 1G, or 0 for none"),
    KEY(prof_signal, CONF_ENUM, 0, 0, prof_signal_names, "off, SIGUSR1, SIGUSR2 or SIGHUP"),
    KEY(prof_prefix, CONF_PATH, 0, 0, NULL, "a file name shorter than 256 bytes"),
    KEY(guard_sample, CONF_UINT, 0, 1000000000, NULL,
        "a whole number: 0 (off), 1 (every block) or N"),
    KEY(guard_max, CONF_SIZE, 1, 0, NULL, "a size of at least 1 such as 64K"),
    KEY(guard_underflow, CONF_ENUM, 0, 0, on_off, "on or off"),
    KEY(live, CONF_ENUM, 0, 0, on_off, "on or off"),
    KEY(map_prefix, CONF_PATH, 0, 0, NULL, "a file name shorter than 256 bytes"),
    KEY(numa, CONF_ENUM, 0, 0, numa_modes, "off, on or interleave"),
    KEY(numa_fake, CONF_UINT, 0, PA_NUMA_MAX_NODES, NULL,
        "a number of pretend nodes from 0 (none) to 8"),
    KEY(thp, CONF_ENUM, 0, 0, thp_modes, "off, auto or always"),
};
#undef KEY

/* Parse value[len] for key k into *out; 0 or -1. */
static int parse_value(const struct conf_key *k, const char *value, size_t len, size_t *out)
{
	if (k->type == CONF_ENUM) {
		for (size_t i = 0; k->names[i] != NULL; i++) {
			if (strlen(k->names[i]) == len && memcmp(k->names[i], value, len) == 0) {
				*out = i;
				return 0;
			}
		}
		return -1;
	}
	if (k->type == CONF_UINT) {
		size_t v = 0, i = 0;
		for (; i < len && value[i] >= '0' && value[i] <= '9' && v <= k->max; i++)
			v = v * 10 + (size_t)(value[i] - '0');
		if (i == 0 || i != len || v < k->min || v > k->max)
			return -1;
		*out = v;
		return 0;
	}
	if (k->type == CONF_LIMIT && len == 4 && memcmp(value, "auto", 4) == 0) {
		*out = PA_MEMORY_LIMIT_AUTO;
		return 0;
	}
	return config_parse_size(value, len, out) == 0 && *out >= k->min &&
	               (k->type != CONF_LIMIT || *out != PA_MEMORY_LIMIT_AUTO)
	           ? 0
	           : -1;
}

int config_parse_size(const char *s, size_t len, size_t *out)
{
	size_t i = 0, v = 0;
	if (len == 0)
		return -1;
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (SIZE_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (i == 0)
		return -1;
	unsigned shift = 0;
	if (i < len) {
		switch (s[i] | 0x20) {
		case 'k':
			shift = 10;
			break;
		case 'm':
			shift = 20;
			break;
		case 'g':
			shift = 30;
			break;
		case 't':
			shift = 40;
			break;
		case 'b':
			shift = 0;
			break;
		default:
			return -1;
		}
		if ((s[i] | 0x20) != 'b')
			i++;
		/* Optional "B" or "iB" after the multiplier. */
		if (i < len && s[i] == 'i' && shift != 0)
			i++;
		if (i < len && (s[i] | 0x20) == 'b')
			i++;
	}
	if (i != len || (shift && v > (SIZE_MAX >> shift)))
		return -1;
	*out = v << shift;
	return 0;
}

/* Append s[0, n) (up to a NUL) as the user wrote it, but on one line: a
 * control character, a newline above all, is written as \xNN. */
static void quote(struct pa_msg *m, const char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i] != '\0'; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != 0x7f) {
			msg_strn(m, &s[i], 1);
			continue;
		}
		char esc[4] = {'\\', 'x', "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]};
		msg_strn(m, esc, sizeof(esc));
	}
}

static void warn(const char *source, const char *what, const char *s, size_t n, const char *tail)
{
	struct pa_msg m;
	msg_begin(&m);
	msg_str(&m, source);
	msg_str(&m, ": ");
	msg_str(&m, what);
	msg_str(&m, " '");
	quote(&m, s, n);
	msg_str(&m, "'");
	msg_str(&m, tail);
	msg_end(&m);
}

/* Apply key[klen] = value[vlen]; 0 or -1 (warned). */
static int apply_one(const char *key, size_t klen, const char *value, size_t vlen,
                     const char *source)
{
	const struct conf_key *k = NULL;
	for (size_t i = 0; i < sizeof(conf_keys) / sizeof(conf_keys[0]); i++)
		if (strlen(conf_keys[i].name) == klen && memcmp(conf_keys[i].name, key, klen) == 0)
			k = &conf_keys[i];
	if (k == NULL) {
		warn(source, "unknown key", key, klen, " ignored");
		return -1;
	}
	if (k->type == CONF_PATH) {
		char *path = (char *)&pa_conf + k->offset;
		if (vlen >= PA_CONF_PATH_MAX) {
			warn(source, "value too long for", k->name, strlen(k->name), "; ignored");
			return -1;
		}
		memcpy(path, value, vlen);
		path[vlen] = '\0';
		return 0;
	}
	size_t v, *field = (size_t *)((char *)&pa_conf + k->offset);
	if (parse_value(k, value, vlen, &v) != 0) {
		struct pa_msg m;
		msg_begin(&m);
		msg_str(&m, source);
		msg_str(&m, ": bad value '");
		quote(&m, value, vlen);
		msg_str(&m, "' for ");
		msg_str(&m, k->name);
		msg_str(&m, " (expected ");
		msg_str(&m, k->expect);
		msg_str(&m, "); keeping ");
		if (k->type == CONF_ENUM)
			msg_str(&m, k->names[*field]);
		else if (k->type == CONF_LIMIT && *field == PA_MEMORY_LIMIT_AUTO)
			msg_str(&m, "auto");
		else
			msg_uint(&m, *field);
		msg_end(&m);
		return -1;
	}
	__atomic_store_n(field, v, __ATOMIC_RELAXED);
	return 0;
}

int config_apply(const char *conf, const char *source)
{
	int refused = 0;
	const char *p = conf;
	while (p != NULL && *p != '\0') {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		if (len == 0) {
			/* tolerate ",," and a trailing comma */
		} else if (eq == NULL) {
			warn(source, "entry without '=':", p, len, " ignored");
			refused++;
		} else if (apply_one(p, (size_t)(eq - p), eq + 1, len - (size_t)(eq - p) - 1,
		                     source) != 0) {
			refused++;
		}
		p = end ? end + 1 : NULL;
	}
	return refused;
}

/* The first malloc of a preloaded process may come before libc has set up
 * environ (from the dynamic loader, or libc's own early initialisation):
 * then read the variable from the kernel's copy. */
static char early_env[4096];

static const char *env_from_proc(const char *name)
{
	long n = os_read_file("/proc/self/environ", early_env, sizeof(early_env) - 1);
	if (n <= 0)
		return NULL;
	early_env[n] = '\0';
	size_t len = strlen(name);
	for (long i = 0; i < n; i += (long)strlen(early_env + i) + 1)
		if (strncmp(early_env + i, name, len) == 0 && early_env[i + (long)len] == '=')
			return early_env + i + len + 1;
	return NULL;
}

void config_load_env(void)
{
	const char *env =
	    environ != NULL ? getenv("PAGEALLOC_CONF") : env_from_proc("PAGEALLOC_CONF");
	if (env != NULL)
		config_apply(env, "PAGEALLOC_CONF");
}

int pa_config_set(const char *key, const char *value)
{
	if (key == NULL || value == NULL) {
		errno = EINVAL;
		return -1;
	}
	if (apply_one(key, strlen(key), value, strlen(value), "pa_config_set") != 0) {
		errno = EINVAL;
		return -1;
	}
	if (config_on_change != NULL)
		config_on_change();
	return 0;
}

int pa_config(const char *conf)
{
	int refused = config_apply(conf, "pa_config");
	if (refused)
		errno = EINVAL;
	if (config_on_change != NULL)
		config_on_change();
	return refused;
}
