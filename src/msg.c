/*
 * msg.c — formatting into a fixed buffer; truncates rather than overflows.
 */
#include "msg.h"

#include <errno.h>

#include "os.h"

void msg_begin(struct pa_msg *m)
{
	m->len = 0;
	msg_str(m, "pagealloc: ");
}

void msg_strn(struct pa_msg *m, const char *s, size_t n)
{
	/* Keep one byte for the newline. */
	for (size_t i = 0; i < n && s[i] != '\0' && m->len < sizeof(m->buf) - 1; i++)
		m->buf[m->len++] = s[i];
}

void msg_str(struct pa_msg *m, const char *s)
{
	msg_strn(m, s, (size_t)-1);
}

void msg_hex(struct pa_msg *m, uintptr_t v)
{
	char tmp[2 + 16];
	size_t n = 0;
	do {
		tmp[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v != 0);
	msg_str(m, "0x");
	while (n > 0)
		msg_strn(m, &tmp[--n], 1);
}

size_t msg_format_uint(char *buf, uint64_t v)
{
	char tmp[MSG_UINT_MAX];
	size_t n = 0, len;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (len = 0; n > 0; len++)
		buf[len] = tmp[--n];
	return len;
}

void msg_uint(struct pa_msg *m, uint64_t v)
{
	char tmp[MSG_UINT_MAX];
	msg_strn(m, tmp, msg_format_uint(tmp, v));
}

void msg_end(struct pa_msg *m)
{
	m->buf[m->len++] = '\n';
	os_write_stderr(m->buf, m->len);
}

void msg_errno(struct pa_msg *m, int err)
{
	static const struct {
		int err;
		const char *text;
	} known[] = {
	    {ENOENT, "no such file or directory"},
	    {EACCES, "permission denied"},
	    {EPERM, "operation not permitted"},
	    {ENOTDIR, "not a directory"},
	    {EISDIR, "is a directory"},
	    {ENOSPC, "no space left on device"},
	    {EDQUOT, "disk quota exceeded"},
	    {EROFS, "read-only file system"},
	    {EIO, "input/output error"},
	    {ENAMETOOLONG, "file name too long"},
	    {EMFILE, "too many open files"},
	    {ENFILE, "too many open files in the system"},
	    {ENOMEM, "out of memory"},
	    {EFBIG, "file too large"},
	    {EXDEV, "across file systems"},
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (known[i].err == err) {
			msg_str(m, known[i].text);
			return;
		}
	}
	msg_str(m, "errno ");
	msg_uint(m, (uint64_t)(err >= 0 ? err : -err));
}
