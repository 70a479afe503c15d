/*
 * cgroup.h — the limits a container sets: the memory limit of the
 * process's cgroup, what the cgroup holds that the kernel cannot reclaim,
 * and the memory pressure the kernel reports (PSI). memory_limit=auto
 * (scavenger.h) follows them.
 *
 * Where the files are. /proc/self/cgroup names the process's cgroup:
 *  - cgroup v2 (the line "0::PATH"): /sys/fs/cgroup/PATH holds memory.max,
 *    memory.current, memory.stat and memory.pressure;
 *  - cgroup v1 (a line "N:...,memory,...:PATH"): /sys/fs/cgroup/memory/PATH
 *    holds memory.limit_in_bytes, memory.usage_in_bytes and memory.stat;
 *    the pressure is the machine's, /proc/pressure/memory.
 * v2 is taken where its directory has a memory.max (a hybrid machine mounts
 * v2 with no memory controller, and v1 holds it). A container without a
 * cgroup namespace sees the host's PATH, which its /sys/fs/cgroup does not
 * have: then the mount's own directory is the cgroup. The directory is
 * found once (cgroup_find); the files are read again at each call.
 *
 * The limit in force is the smallest of the cgroup's own and its ancestors'
 * up to the mount: a parent's limit binds its children. "max" (v2) and v1's
 * "unlimited", LONG_MAX rounded down to a page (9223372036854771712), or any
 * value from 2^62 up, mean none.
 *
 * Every read is a raw open/read/close into a buffer on the caller's stack
 * (os_read_file): nothing allocates, nothing uses stdio. The root argument
 * is prefixed to every path ("" for the machine's own files; a test points
 * it at a directory of fake files).
 */
#ifndef PA_CGROUP_H
#define PA_CGROUP_H

#include <stddef.h>

#define PA_CGROUP_PATH_MAX 512

struct pa_cgroup {
	int version;                  /* 2, 1, or 0: no memory controller found */
	char dir[PA_CGROUP_PATH_MAX]; /* the cgroup's directory ("" when version 0) */
	size_t mount_len;             /* dir[0, mount_len): the mount; the walk up stops there */
	char psi[PA_CGROUP_PATH_MAX]; /* the pressure file, "" none */
};

/* Find the process's memory cgroup under root into *cg: its version (0:
 * none). Always fills *cg. */
int cgroup_find(struct pa_cgroup *cg, const char *root);

/* The limit in force in bytes (0: none), and in *from_len (if not NULL) the
 * length of the prefix of cg->dir whose limit file binds (cgroup_limit_file
 * names it). */
size_t cgroup_limit(const struct pa_cgroup *cg, size_t *from_len);

/* The name of the limit file of dir[0, len) into path (PA_CGROUP_PATH_MAX
 * bytes): 0, or -1 when it does not fit. */
int cgroup_limit_file(const struct pa_cgroup *cg, size_t len, char *path);

/* What the cgroup is charged for that the kernel cannot reclaim: its usage
 * less its file pages (the page cache, dropped under the limit before any
 * process is killed). 0, or -1 when unreadable. */
int cgroup_unreclaimable(const struct pa_cgroup *cg, size_t *bytes);

/* The pressure: PSI's "some avg10" (the share of the last 10 s in which a
 * task waited for memory) in hundredths of a percent. 0, or -1 when
 * unreadable. */
int cgroup_pressure(const struct pa_cgroup *cg, unsigned *pct100);

/* The parsers, for the tests: a limit file's text (0: none); a value of a
 * memory.stat's "key value" lines; the "some avg10=" of a PSI file. 0, or
 * -1 when the text does not have it. */
int cgroup_parse_limit(const char *text, size_t *bytes);
int cgroup_parse_stat(const char *text, const char *key, size_t *value);
int cgroup_parse_psi(const char *text, unsigned *pct100);

#endif
