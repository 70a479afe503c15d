/*
 * cgroup.c — the container's memory limit, its unreclaimable charge and its
 * memory pressure, read from the cgroup files (cgroup.h says where they are
 * and what each value means).
 */
#include "cgroup.h"

#include <stdint.h>
#include <string.h>

#include "os.h"

/* A v1 limit from here up is the kernel's "unlimited" (LONG_MAX rounded
 * down to a page), or so far above any machine that it is none. */
#define CGROUP_NO_LIMIT ((size_t)1 << 62)

/* The files' buffer: /proc/self/cgroup and memory.stat fit in it. */
#define CGROUP_TEXT_MAX 4096

/* dst = a + b + c (c may be NULL): 0, or -1 when it does not fit. */
static int join(char *dst, const char *a, const char *b, size_t blen, const char *c)
{
	size_t na = strlen(a), nc = c != NULL ? strlen(c) : 0;
	if (na + blen + nc >= PA_CGROUP_PATH_MAX)
		return -1;
	memmove(dst, a, na);
	memcpy(dst + na, b, blen);
	memcpy(dst + na + blen, c != NULL ? c : "", nc);
	dst[na + blen + nc] = '\0';
	return 0;
}

static const char *limit_name(int version)
{
	return version == 2 ? "/memory.max" : "/memory.limit_in_bytes";
}

/* The text of dir[0, len) + name into buf: its length, or -1. */
static long read_in(const char *dir, size_t len, const char *name, char *buf, size_t cap)
{
	char path[PA_CGROUP_PATH_MAX];
	if (join(path, "", dir, len, name) != 0)
		return -1;
	return os_read_file(path, buf, cap);
}

static int readable(const char *dir, size_t len, const char *name)
{
	char buf[64];
	return read_in(dir, len, name, buf, sizeof(buf)) > 0;
}

/* Whether the comma-separated list s[0, n) has the word w. */
static int has_word(const char *s, size_t n, const char *w)
{
	size_t wl = strlen(w);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && s[j] != ',')
			j++;
		if (j - i == wl && memcmp(s + i, w, wl) == 0)
			return 1;
		i = j + 1;
	}
	return 0;
}

/* The cgroup at path[0, plen) under the mount root + mnt, if its directory
 * (or the mount's own, see cgroup.h) has the version's limit file: 1, else 0. */
static int place(struct pa_cgroup *cg, const char *root, const char *mnt, const char *path,
                 size_t plen, int version)
{
	char mount[PA_CGROUP_PATH_MAX];
	if (join(mount, root, mnt, strlen(mnt), NULL) != 0)
		return 0;
	while (plen > 0 && path[plen - 1] == '/')
		plen--; /* "/" is the mount itself */
	cg->mount_len = strlen(mount);
	if (join(cg->dir, mount, path, plen, NULL) != 0 ||
	    !readable(cg->dir, strlen(cg->dir), limit_name(version))) {
		memcpy(cg->dir, mount, cg->mount_len + 1);
		if (!readable(cg->dir, cg->mount_len, limit_name(version)))
			return 0;
	}
	cg->version = version;
	cg->psi[0] = '\0';
	if (version == 2 && readable(cg->dir, strlen(cg->dir), "/memory.pressure"))
		join(cg->psi, cg->dir, "/memory.pressure", strlen("/memory.pressure"), NULL);
	else if (join(cg->psi, root, "/proc/pressure/memory", strlen("/proc/pressure/memory"),
	              NULL) == 0 &&
	         !readable(cg->psi, strlen(cg->psi), ""))
		cg->psi[0] = '\0';
	return 1;
}

int cgroup_find(struct pa_cgroup *cg, const char *root)
{
	memset(cg, 0, sizeof(*cg));
	char buf[CGROUP_TEXT_MAX], path[PA_CGROUP_PATH_MAX];
	if (join(path, root, "/proc/self/cgroup", strlen("/proc/self/cgroup"), NULL) != 0 ||
	    os_read_file(path, buf, sizeof(buf)) <= 0)
		return 0;
	/* Lines "ID:CONTROLLERS:PATH". */
	const char *v2 = NULL, *v1 = NULL;
	size_t v2len = 0, v1len = 0;
	for (const char *line = buf; *line != '\0';) {
		const char *eol = strchr(line, '\n');
		size_t n = eol != NULL ? (size_t)(eol - line) : strlen(line);
		const char *c1 = memchr(line, ':', n);
		const char *c2 =
		    c1 != NULL ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - line)) : NULL;
		if (c2 != NULL) {
			const char *p = c2 + 1;
			size_t plen = n - (size_t)(p - line);
			if (c1 - line == 1 && line[0] == '0' && c2 == c1 + 1) {
				v2 = p;
				v2len = plen;
			} else if (has_word(c1 + 1, (size_t)(c2 - c1 - 1), "memory")) {
				v1 = p;
				v1len = plen;
			}
		}
		line += n + (eol != NULL);
	}
	if (v2 != NULL && place(cg, root, "/sys/fs/cgroup", v2, v2len, 2))
		return 2;
	if (v1 != NULL && place(cg, root, "/sys/fs/cgroup/memory", v1, v1len, 1))
		return 1;
	memset(cg, 0, sizeof(*cg));
	return 0;
}

int cgroup_limit_file(const struct pa_cgroup *cg, size_t len, char *path)
{
	const char *name = limit_name(cg->version);
	return join(path, "", cg->dir, len, name);
}

size_t cgroup_limit(const struct pa_cgroup *cg, size_t *from_len)
{
	size_t best = 0, from = 0;
	if (cg->version == 0)
		goto out;
	for (size_t len = strlen(cg->dir);;) {
		char buf[64];
		size_t v;
		if (read_in(cg->dir, len, limit_name(cg->version), buf, sizeof(buf)) <= 0 ||
		    cgroup_parse_limit(buf, &v) != 0)
			break; /* v2's root has no memory.max */
		if (v != 0 && (best == 0 || v < best)) {
			best = v;
			from = len;
		}
		if (len <= cg->mount_len)
			break;
		while (len > cg->mount_len && cg->dir[len - 1] != '/')
			len--;
		if (len > cg->mount_len)
			len--; /* the '/' */
	}
out:
	if (from_len != NULL)
		*from_len = from;
	return best;
}

/* A decimal number at s, up to a space or the end of the line: 0 or -1. */
static int parse_number(const char *s, size_t *out)
{
	size_t v = 0, i = 0;
	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (SIZE_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (i == 0 || (s[i] != '\0' && s[i] != '\n' && s[i] != ' '))
		return -1;
	*out = v;
	return 0;
}

int cgroup_parse_limit(const char *text, size_t *bytes)
{
	if (strncmp(text, "max", 3) == 0 && (text[3] == '\0' || text[3] == '\n')) {
		*bytes = 0;
		return 0;
	}
	size_t v;
	if (parse_number(text, &v) != 0)
		return -1;
	*bytes = v >= CGROUP_NO_LIMIT ? 0 : v;
	return 0;
}

int cgroup_parse_stat(const char *text, const char *key, size_t *value)
{
	size_t kl = strlen(key);
	for (const char *line = text; *line != '\0';) {
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			return parse_number(line + kl + 1, value);
		const char *eol = strchr(line, '\n');
		if (eol == NULL)
			break;
		line = eol + 1;
	}
	return -1;
}

int cgroup_parse_psi(const char *text, unsigned *pct100)
{
	/* "some avg10=1.23 avg60=... total=..." */
	if (strncmp(text, "some avg10=", 11) != 0)
		return -1;
	const char *p = text + 11;
	unsigned whole = 0, frac = 0, digits = 0;
	for (; *p >= '0' && *p <= '9' && whole < 1000; p++, digits++)
		whole = whole * 10 + (unsigned)(*p - '0');
	if (digits == 0 || p[0] != '.' || p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9')
		return -1;
	frac = (unsigned)(p[1] - '0') * 10 + (unsigned)(p[2] - '0');
	*pct100 = whole * 100 + frac;
	return 0;
}

int cgroup_unreclaimable(const struct pa_cgroup *cg, size_t *bytes)
{
	if (cg->version == 0)
		return -1;
	char buf[CGROUP_TEXT_MAX];
	size_t len = strlen(cg->dir), usage, active, inactive;
	const char *usage_name = cg->version == 2 ? "/memory.current" : "/memory.usage_in_bytes";
	if (read_in(cg->dir, len, usage_name, buf, sizeof(buf)) <= 0 ||
	    parse_number(buf, &usage) != 0 ||
	    read_in(cg->dir, len, "/memory.stat", buf, sizeof(buf)) <= 0)
		return -1;
	/* Both versions' usage counts the cgroup's children: so do v2's
	 * memory.stat and v1's total_ lines. */
	int v1 = cg->version == 1;
	if (cgroup_parse_stat(buf, v1 ? "total_active_file" : "active_file", &active) != 0 ||
	    cgroup_parse_stat(buf, v1 ? "total_inactive_file" : "inactive_file", &inactive) != 0)
		return -1;
	*bytes = usage > active + inactive ? usage - active - inactive : 0;
	return 0;
}

int cgroup_pressure(const struct pa_cgroup *cg, unsigned *pct100)
{
	char buf[256];
	if (cg->psi[0] == '\0' || os_read_file(cg->psi, buf, sizeof(buf)) <= 0)
		return -1;
	return cgroup_parse_psi(buf, pct100);
}
