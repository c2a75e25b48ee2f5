/* base.h — cleanup helpers and small macros shared by every module.
 *
 * Conventions (see STYLE.md): functions that can fail return int, >= 0 on
 * success and -errno on failure; out-params come last, are named ret_*, and are
 * written only on success. */
#pragma once

#include <stdarg.h>

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _warn_unused_ __attribute__((warn_unused_result))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void freep(void *p) { free(*(void **)p); }
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Defines name##p(type **) calling func(*p): for _cleanup_(name##p). */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                \
        static inline void func##p(type *p) {                                  \
                if (*p)                                                        \
                        func(*p);                                              \
        }

#define TAKE_PTR(p)                                                            \
        ({                                                                     \
                __typeof__(p) _taken = (p);                                        \
                (p) = NULL;                                                    \
                _taken;                                                        \
        })

#define TAKE_FD(fd)                                                            \
        ({                                                                     \
                int _taken = (fd);                                             \
                (fd) = -1;                                                     \
                _taken;                                                        \
        })

/* Frees a NULL-terminated array of strings and the array. Accepts NULL. */
void strv_free(char **v);
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free)
#define _cleanup_strv_free_ _cleanup_(strv_freep)
size_t strv_length(char *const *v);
/* Appends a copy of s; *v may be NULL. */
int strv_push(char ***v, const char *s);
int strv_pushf(char ***v, const char *fmt, ...) _printf_(2, 3);

static inline bool streq(const char *a, const char *b) { return strcmp(a, b) == 0; }
static inline bool strempty(const char *s) { return !s || !*s; }
bool startswith(const char *s, const char *prefix);
bool endswith(const char *s, const char *suffix);

/* Monotonic and wall clocks in milliseconds. */
int64_t now_ms(void);
int64_t wall_ms(void);

/* Formatting into a fresh string; returns -ENOMEM on failure. */
int xasprintf(char **ret, const char *fmt, ...) _printf_(2, 3);
/* The va_list form, the one formatter every variadic helper calls: the
 * length (>= 0) with *ret set (caller frees), or -ENOMEM with *ret untouched. */
int xvasprintf(char **ret, const char *fmt, va_list ap) _printf_(2, 0);
/* Sets *ret_error (when ret_error is not NULL; caller frees; NULL when out of
 * memory) to the formatted message and returns r: `return errorf(-EINVAL,
 * ret_error, "bad %s", x);`. */
int errorf(int r, char **ret_error, const char *fmt, ...) _printf_(3, 4);

/* Overwrites memory in a way the compiler may not elide (for secrets). */
void secure_zero(void *p, size_t n);
