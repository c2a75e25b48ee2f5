#include "base/base.h"

#include <stdarg.h>
#include <time.h>

void strv_free(char **v) {
        if (!v)
                return;
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}

size_t strv_length(char *const *v) {
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

int strv_push(char ***v, const char *s) {
        size_t n = strv_length(*v);
        char *copy = strdup(s);
        if (!copy)
                return -ENOMEM;
        char **nv = realloc(*v, (n + 2) * sizeof(char *));
        if (!nv) {
                free(copy);
                return -ENOMEM;
        }
        nv[n] = copy;
        nv[n + 1] = NULL;
        *v = nv;
        return 0;
}

int strv_pushf(char ***v, const char *fmt, ...) {
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int k = xvasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0)
                return k;
        int r = strv_push(v, s);
        free(s);
        return r;
}

bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool endswith(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

static int64_t clock_ms(clockid_t id) {
        struct timespec ts;
        clock_gettime(id, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }
int64_t wall_ms(void) { return clock_ms(CLOCK_REALTIME); }

int xvasprintf(char **ret, const char *fmt, va_list ap) {
        char *s = NULL;
        int k = vasprintf(&s, fmt, ap);
        if (k < 0)
                return -ENOMEM;
        *ret = s;
        return k;
}

int xasprintf(char **ret, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int k = xvasprintf(ret, fmt, ap);
        va_end(ap);
        return k < 0 ? k : 0;
}

int errorf(int r, char **ret_error, const char *fmt, ...) {
        if (!ret_error)
                return r;
        va_list ap;
        va_start(ap, fmt);
        *ret_error = NULL;
        (void)xvasprintf(ret_error, fmt, ap);
        va_end(ap);
        return r;
}

void secure_zero(void *p, size_t n) {
        if (p)
                explicit_bzero(p, n);
}

#include "base/embedded.h"

const struct embedded_file *embedded_find(const struct embedded_file *list, const char *path) {
        for (; list && list->path; list++)
                if (streq(list->path, path))
                        return list;
        return NULL;
}
