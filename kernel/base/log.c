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
