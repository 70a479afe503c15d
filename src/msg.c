/*
 * msg.c — formatting into a fixed buffer; truncates rather than overflows.
 */
#include "msg.h"

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

void msg_uint(struct pa_msg *m, uint64_t v)
{
	char tmp[20];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (n > 0)
		msg_strn(m, &tmp[--n], 1);
}

void msg_end(struct pa_msg *m)
{
	m->buf[m->len++] = '\n';
	os_write_stderr(m->buf, m->len);
}
