#include "base/log.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>

struct rotlog {
        char *path;
        int fd;
        size_t size, max_bytes;
        int keep;
        pthread_mutex_t lock;
};

static int rotlog_reopen(struct rotlog *l) {
        if (l->fd >= 0)
                close(l->fd);
        l->fd = open(l->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (l->fd < 0)
                return -errno;
        struct stat st;
        l->size = fstat(l->fd, &st) == 0 ? (size_t)st.st_size : 0;
        return 0;
}

int rotlog_open(const char *path, size_t max_bytes, int keep, struct rotlog **ret) {
        struct rotlog *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->path = strdup(path);
        l->fd = -1;
        l->max_bytes = max_bytes;
        l->keep = keep < 1 ? 1 : keep;
        pthread_mutex_init(&l->lock, NULL);
        int r = l->path ? rotlog_reopen(l) : -ENOMEM;
        if (r < 0) {
                rotlog_free(l);
                return r;
        }
        *ret = l;
        return 0;
}

static void rotlog_rotate(struct rotlog *l) {
        char from[4096], to[4096];
        for (int i = l->keep - 1; i >= 1; i--) {
                snprintf(from, sizeof from, "%s.%d", l->path, i);
                snprintf(to, sizeof to, "%s.%d", l->path, i + 1);
                (void)rename(from, to);
        }
        snprintf(to, sizeof to, "%s.1", l->path);
        (void)rename(l->path, to);
        (void)rotlog_reopen(l);
}

void rotlog_write(struct rotlog *l, const char *data, size_t len) {
        if (!l)
                return;
        pthread_mutex_lock(&l->lock);
        if (l->size + len > l->max_bytes && l->size > 0)
                rotlog_rotate(l);
        if (l->fd >= 0) {
                ssize_t k = write(l->fd, data, len);
                if (k > 0)
                        l->size += (size_t)k;
        }
        pthread_mutex_unlock(&l->lock);
}

void rotlog_free(struct rotlog *l) {
        if (!l)
                return;
        if (l->fd >= 0)
                close(l->fd);
        pthread_mutex_destroy(&l->lock);
        free(l->path);
        free(l);
}

/* Writes [p, p + n) of a stream whose current line already has *col bytes
 * (*cut of them dropped), keeping at most max bytes of each line. */
static void pump_chunk(struct rotlog *l, const char *p, size_t n, size_t max, size_t *col, size_t *cut) {
        while (n > 0) {
                const char *nl = memchr(p, '\n', n);
                size_t len = nl ? (size_t)(nl - p) : n;
                size_t keep = *col >= max ? 0 : len < max - *col ? len : max - *col;
                if (keep > 0)
                        rotlog_write(l, p, keep);
                *col += keep;
                *cut += len - keep;
                if (!nl)
                        return;
                char note[64];
                int k = *cut ? snprintf(note, sizeof note, " [... %zu bytes not logged]\n", *cut)
                             : snprintf(note, sizeof note, "\n");
                rotlog_write(l, note, (size_t)k);
                *col = *cut = 0;
                p = nl + 1;
                n -= len + 1;
        }
}

void rotlog_pump(struct rotlog *l, int fd, size_t max_line) {
        char buf[16384];
        size_t col = 0, cut = 0;
        for (;;) {
                ssize_t n = read(fd, buf, sizeof buf);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                if (max_line == 0)
                        rotlog_write(l, buf, (size_t)n);
                else
                        pump_chunk(l, buf, (size_t)n, max_line, &col, &cut);
        }
        if (cut > 0)
                pump_chunk(l, "\n", 1, max_line, &col, &cut);
}

static struct rotlog *log_file;
static enum log_level log_min = LOG_INFO;
static const char *log_ident = "seed";

int log_open(const char *path, size_t max_bytes, int keep) {
        struct rotlog *l;
        int r = rotlog_open(path, max_bytes, keep, &l);
        if (r < 0)
                return r;
        rotlog_free(log_file);
        log_file = l;
        return 0;
}

void log_close(void) {
        rotlog_free(log_file);
        log_file = NULL;
}

void log_set_level(enum log_level l) { log_min = l; }
void log_set_ident(const char *ident) { log_ident = ident; }

void log_msg(enum log_level l, int err, const char *fmt, ...) {
        static const char *names[] = {"debug", "info", "warn", "error"};
        if (l < log_min)
                return;
        int saved = errno;
        if (err)
                errno = err < 0 ? -err : err;
        char msg[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);

        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        char line[2200];
        int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: %s\n",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, ts.tv_nsec / 1000000, log_ident, names[l], msg);
        if (n < 0)
                n = 0;
        if ((size_t)n >= sizeof line)
                n = sizeof line - 1;
        (void)!write(STDERR_FILENO, line, (size_t)n);
        rotlog_write(log_file, line, (size_t)n);
        errno = saved;
}

/* ---- rate-limited lines ---- */

#define LOG_LIMIT_KEY_MAX 64

struct log_limit_slot {
        const char *reason; /* NULL: free */
        char key[LOG_LIMIT_KEY_MAX];
        bool open;          /* a line was written at start, and its interval runs */
        int64_t start;
        uint64_t suppressed;
};

struct log_limiter {
        pthread_mutex_t lock;
        int64_t interval_ms;
        struct log_limit_slot slots[LOG_LIMIT_KEYS];
        /* Past the table: one slot per reason (any key), so a flood of one
         * reason from many clients does not silence the others; then one
         * for everything. */
        struct log_limit_slot reasons[LOG_LIMIT_REASONS];
        struct log_limit_slot others;
};

int log_limiter_new(int64_t interval_ms, struct log_limiter **ret) {
        if (interval_ms <= 0)
                return -EINVAL;
        struct log_limiter *l = calloc(1, sizeof *l);
        if (!l)
                return -ENOMEM;
        pthread_mutex_init(&l->lock, NULL);
        l->interval_ms = interval_ms;
        *ret = l;
        return 0;
}

void log_limiter_free(struct log_limiter *l) {
        if (!l)
                return;
        pthread_mutex_destroy(&l->lock);
        free(l);
}

static bool slot_is(const struct log_limit_slot *s, const char *reason, const char *key) {
        return s->reason && streq(s->reason, reason) && strncmp(s->key, key, LOG_LIMIT_KEY_MAX - 1) == 0;
}

/* In v[0..n): the slot for (reason, key), else a free one or one whose
 * interval is over (the oldest), claimed; NULL when all are busy. */
static struct log_limit_slot *slot_pick(struct log_limit_slot *v, size_t n, int64_t interval, const char *reason,
                                        const char *key, int64_t now) {
        struct log_limit_slot *spare = NULL;
        for (size_t i = 0; i < n; i++) {
                struct log_limit_slot *s = &v[i];
                if (slot_is(s, reason, key))
                        return s;
                bool over = !s->reason || !s->open || now - s->start >= interval;
                if (over && (!spare || (spare->reason && (!s->reason || s->start < spare->start))))
                        spare = s;
        }
        if (spare) {
                *spare = (struct log_limit_slot){.reason = reason};
                snprintf(spare->key, sizeof spare->key, "%s", key);
        }
        return spare;
}

static struct log_limit_slot *slot_find(struct log_limiter *l, const char *reason, const char *key,
                                        int64_t now) {
        struct log_limit_slot *s = slot_pick(l->slots, LOG_LIMIT_KEYS, l->interval_ms, reason, key, now);
        if (!s)
                s = slot_pick(l->reasons, LOG_LIMIT_REASONS, l->interval_ms, reason, "*", now);
        return s ? s : &l->others;
}

bool log_limiter_admit(struct log_limiter *l, const char *reason, const char *key, int64_t now,
                       uint64_t *ret_suppressed) {
        pthread_mutex_lock(&l->lock);
        struct log_limit_slot *s = slot_find(l, reason, key ? key : "", now);
        bool admit = !s->open || now - s->start >= l->interval_ms;
        if (admit) {
                *ret_suppressed = s->suppressed;
                s->open = true;
                s->start = now;
                s->suppressed = 0;
        } else
                s->suppressed++;
        pthread_mutex_unlock(&l->lock);
        return admit;
}

static struct log_limiter log_refusals = {
        .lock = PTHREAD_MUTEX_INITIALIZER,
        .interval_ms = LOG_LIMIT_INTERVAL_MS,
};

void log_limited(enum log_level l, const char *key, const char *fmt, ...) {
        uint64_t suppressed = 0;
        if (l < log_min || !log_limiter_admit(&log_refusals, fmt, key, now_ms(), &suppressed))
                return;
        int saved = errno;
        char msg[1900];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (suppressed > 0)
                log_msg(l, 0, "%s (and %llu more like it since the last one logged)", msg,
                        (unsigned long long)suppressed);
        else
                log_msg(l, 0, "%s", msg);
        errno = saved;
}
