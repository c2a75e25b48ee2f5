/* buf.h — a growable byte buffer with a hard size cap (like curl's dynbuf).
 * Every buffer fed from outside is created with a cap; appends past it fail
 * with -E2BIG and leave the buffer as it was. */
#pragma once

#include "base/base.h"

struct buf {
        char *data; /* always NUL-terminated when non-NULL */
        size_t len, cap, max;
};

#define BUF_INIT(maxbytes) ((struct buf){.max = (maxbytes)})

int buf_append(struct buf *b, const void *data, size_t len);
int buf_puts(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...) _printf_(2, 3);
void buf_reset(struct buf *b);
void buf_free(struct buf *b);
/* Hands the data to the caller (who frees it) and resets the buffer. */
char *buf_steal(struct buf *b);
static inline void buf_freep(struct buf *b) { buf_free(b); }
#define _cleanup_buf_ _cleanup_(buf_freep)

/* Keeps the first head and last tail bytes of a stream, counting the bytes
 * dropped in between: for capped command output. */
struct headtail {
        struct buf head;
        char *tail; /* ring of size tail_max */
        size_t tail_max, tail_len, tail_pos;
        size_t dropped;
};
int headtail_init(struct headtail *h, size_t head_max, size_t tail_max);
/* Feeds what fd gives into h until EOF (or a read error): 0; -ETIMEDOUT when
 * the deadline (now_ms() time; INT64_MAX: none) passes first. */
int headtail_read_fd(struct headtail *h, int fd, int64_t deadline);
void headtail_feed(struct headtail *h, const char *data, size_t len);
/* The kept output with a "[… N bytes omitted …]" marker, as a C string:
 * NUL bytes in the stream become U+FFFD. Caller frees. */
char *headtail_render(const struct headtail *h);
void headtail_free(struct headtail *h);
