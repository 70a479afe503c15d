/*
 * profwrite.h — writing a heap profile in pprof's format (profile.proto,
 * gzip-compressed), from inside the process, without malloc.
 *
 * prof.c hands over its sites (one per distinct stack) with their
 * estimates already weighted back (prof.h); this file encodes them as Go's
 * heap profiles are encoded: sample types alloc_objects/count,
 * alloc_space/bytes, inuse_objects/count, inuse_space/bytes (in that
 * order, inuse_space the default), period type space/bytes with the
 * sampling period, one Location per distinct address, and a Mapping per
 * executable file mapping of /proc/self/maps with its file name and GNU
 * build ID, so that `go tool pprof BINARY FILE` and `pprof` symbolize the
 * program's code and its libraries' from the files on disk.
 *
 * Memory comes from os_alloc (never malloc), files are written with os.c's
 * system calls: first to PATH.tmp.PID, then renamed onto PATH, so a
 * truncated profile never sits under the final name.
 */
#ifndef PA_PROFWRITE_H
#define PA_PROFWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "hidden.h"

/* The most frames a stack keeps. */
#define PROF_MAX_DEPTH 64u

/* The longest varint (a 64-bit value, 7 bits a byte). */
#define PROFW_VARINT_MAX 10u

/* v as a varint (protobuf's, 7 bits a byte, low first) at p, which has
 * room for PROFW_VARINT_MAX bytes; returns the bytes written. */
static inline size_t profw_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	for (; v >= 0x80; v >>= 7)
		p[n++] = (uint8_t)(v | 0x80);
	p[n++] = (uint8_t)v;
	return n;
}

/* One site: a stack, innermost frame first (the caller of malloc first:
 * the allocator's frames are already trimmed), each address a return
 * address minus one (inside the call instruction, as pprof expects of a
 * caller's frame), and its estimates (rounded to integers by the caller).
 * pc points to memory that stays valid during profw_write. */
struct profw_site {
	const uintptr_t *pc;
	uint32_t depth;
	int64_t alloc_objects, alloc_space, inuse_objects, inuse_space;
};

struct profw_info {
	int64_t period;      /* the mean sampling interval, bytes (prof_sample) */
	int64_t time_ns;     /* when it was taken: ns since the Unix epoch */
	int64_t duration_ns; /* since profiling began */
};

/* Encode n sites and write them, gzip-compressed, to `path` (through
 * PATH.tmp.PID and a rename). 0, or -1 with errno set (the temporary file
 * is unlinked; a profile already at PATH stays as it was). Calls no
 * malloc and no stdio, so it may run inside the allocator. Thread-safe:
 * holds no lock of the allocator; the caller serialises concurrent writes
 * if it wants sequence numbers in order. */
int profw_write(const char *path, const struct profw_site *sites, size_t n,
                const struct profw_info *info);

/* The gzip encoder profw_write uses, for the tests to feed edge cases:
 * in[0, n) as one gzip member (a DEFLATE block with fixed Huffman codes)
 * into out, which holds profw_gzip_bound(n) bytes. Its length, or 0 with
 * errno ENOMEM when the matcher's 256 KiB of tables cannot be mapped. */
size_t profw_gzip_bound(size_t n);
size_t profw_gzip(const uint8_t *in, size_t n, uint8_t *out);

#endif
