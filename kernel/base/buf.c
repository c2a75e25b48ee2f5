#include "base/buf.h"
#include "base/fileio.h"

#include <stdarg.h>

/* Room for len more bytes and the NUL, within b->max. */
static int buf_reserve(struct buf *b, size_t len) {
        if (len > b->max || b->len > b->max - len)
                return -E2BIG;
        if (b->len + len + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 256;
                while (cap < b->len + len + 1)
                        cap *= 2;
                char *d = realloc(b->data, cap);
                if (!d)
                        return -ENOMEM;
                b->data = d;
                b->cap = cap;
        }
        return 0;
}

int buf_append(struct buf *b, const void *data, size_t len) {
        int r = buf_reserve(b, len);
        if (r < 0)
                return r;
        if (len)
                memcpy(b->data + b->len, data, len);
        b->len += len;
        b->data[b->len] = 0;
        return 0;
}

int buf_puts(struct buf *b, const char *s) { return buf_append(b, s, strlen(s)); }

int buf_printf(struct buf *b, const char *fmt, ...) {
        /* Formatted in place: once when it fits the room there is, twice
         * (measured, then written) when the buffer must grow first. */
        va_list ap;
        size_t room = b->cap - b->len;
        va_start(ap, fmt);
        int k = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -EINVAL;
        int r = buf_reserve(b, (size_t)k);
        if (r < 0) {
                if (b->data)
                        b->data[b->len] = 0; /* what the first pass wrote is not the buffer's */
                return r;
        }
        if (!b->data || (size_t)k >= room) {
                va_start(ap, fmt);
                vsnprintf(b->data + b->len, (size_t)k + 1, fmt, ap);
                va_end(ap);
        }
        b->len += (size_t)k;
        return 0;
}

void buf_reset(struct buf *b) {
        b->len = 0;
        if (b->data)
                b->data[0] = 0;
}

void buf_free(struct buf *b) {
        free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}

char *buf_steal(struct buf *b) {
        char *d = b->data ? b->data : strdup("");
        b->data = NULL;
        b->len = b->cap = 0;
        return d;
}

int headtail_init(struct headtail *h, size_t head_max, size_t tail_max) {
        *h = (struct headtail){.head = BUF_INIT(head_max), .tail_max = tail_max};
        if (tail_max) {
                h->tail = malloc(tail_max);
                if (!h->tail)
                        return -ENOMEM;
        }
        return 0;
}

void headtail_feed(struct headtail *h, const char *data, size_t len) {
        size_t room = h->head.max - h->head.len;
        size_t take = len < room ? len : room;
        if (take && buf_append(&h->head, data, take) < 0)
                take = 0;
        data += take;
        len -= take;
        for (size_t i = 0; i < len; i++) {
                if (h->tail_max == 0) {
                        h->dropped++;
                        continue;
                }
                if (h->tail_len == h->tail_max)
                        h->dropped++;
                else
                        h->tail_len++;
                h->tail[h->tail_pos] = data[i];
                h->tail_pos = (h->tail_pos + 1) % h->tail_max;
        }
}

/* Appends data as text: a NUL byte becomes U+FFFD, so nothing after it is
 * lost when the result is used as a C string. */
static int append_text(struct buf *out, const char *data, size_t len) {
        for (size_t i = 0; i < len;) {
                const char *nul = memchr(data + i, 0, len - i);
                size_t n = nul ? (size_t)(nul - (data + i)) : len - i;
                if (buf_append(out, data + i, n) < 0 || (nul && buf_append(out, "\xEF\xBF\xBD", 3) < 0))
                        return -ENOMEM;
                i += n + (nul ? 1 : 0);
        }
        return 0;
}

char *headtail_render(const struct headtail *h) {
        struct buf out = BUF_INIT(SIZE_MAX / 2);
        if (append_text(&out, h->head.data ? h->head.data : "", h->head.len) < 0)
                goto fail;
        if (h->dropped && buf_printf(&out, "\n[... %zu bytes omitted ...]\n", h->dropped) < 0)
                goto fail;
        size_t start = (h->tail_pos + h->tail_max - h->tail_len) % (h->tail_max ? h->tail_max : 1);
        for (size_t i = 0; i < h->tail_len; i++)
                if (append_text(&out, &h->tail[(start + i) % h->tail_max], 1) < 0)
                        goto fail;
        return buf_steal(&out);
fail:
        buf_free(&out);
        return NULL;
}

void headtail_free(struct headtail *h) {
        buf_free(&h->head);
        free(h->tail);
        h->tail = NULL;
}

int headtail_read_fd(struct headtail *h, int fd, int64_t deadline) {
        char chunk[65536];
        for (;;) {
                int r = fd_wait_readable(fd, deadline);
                if (r == -ETIMEDOUT)
                        return r;
                if (r < 0)
                        return 0;
                ssize_t n = read(fd, chunk, sizeof chunk);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return 0;
                headtail_feed(h, chunk, (size_t)n);
        }
}
