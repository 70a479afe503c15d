/*
 * msg.h — one-line diagnostics without stdio or malloc.
 *
 * A message is built in a caller-provided stack buffer from pieces and
 * written to stderr with one write(2), so concurrent messages do not
 * interleave mid-line. Every line starts with "pagealloc: ".
 */
#ifndef PA_MSG_H
#define PA_MSG_H

#include <stddef.h>
#include <stdint.h>

struct pa_msg {
	char buf[2048]; /* a guarded block's report holds two stacks (guard.h) */
	size_t len;
};

void msg_begin(struct pa_msg *m);
void msg_str(struct pa_msg *m, const char *s);
void msg_strn(struct pa_msg *m, const char *s, size_t n);
void msg_hex(struct pa_msg *m, uintptr_t v); /* 0x... */
void msg_uint(struct pa_msg *m, uint64_t v); /* decimal */
/* v in decimal into buf (MSG_UINT_MAX bytes at most, no NUL); its length.
 * The one decimal formatter of the allocator's files and messages. */
#define MSG_UINT_MAX 20u
size_t msg_format_uint(char *buf, uint64_t v);
void msg_end(struct pa_msg *m); /* newline + write */
/* What errno value err means, in words ("no space left on device"), from a
 * table of our own: strerror may translate, and translating allocates. */
void msg_errno(struct pa_msg *m, int err);

#endif
