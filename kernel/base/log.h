/* log.h — the kernel's log. Lines go to stderr and, once log_open() is called,
 * to a size-rotated file. Never pass tokens, passwords, keys, DSNs or
 * Authorization headers to these functions. */
#pragma once

#include "base/base.h"

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Also write to path, rotating to path.1 … path.<keep> past max_bytes. */
int log_open(const char *path, size_t max_bytes, int keep);
void log_close(void);
void log_set_level(enum log_level l);
/* Names the component shown in every line ("kernel", "seed", …). Borrowed. */
void log_set_ident(const char *ident);

void log_msg(enum log_level l, int err, const char *fmt, ...) _printf_(3, 4);

#define log_debug(...) log_msg(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, 0, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, 0, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, 0, __VA_ARGS__)
/* Logs with errno set to -r (so %m names it) and returns r (negative). */
#define log_error_errno(r, ...) ({ int _r = (r); log_msg(LOG_ERROR, _r, __VA_ARGS__); _r < 0 ? _r : -_r; })
#define log_warn_errno(r, ...) ({ int _r = (r); log_msg(LOG_WARN, _r, __VA_ARGS__); _r < 0 ? _r : -_r; })

/* Lines a peer can cause at will (refused requests): one per reason and key
 * (the client) per LOG_LIMIT_INTERVAL_MS; the others are counted, and the
 * count is added to the next line logged for that reason and key. At most
 * LOG_LIMIT_KEYS reasons and keys are tracked at once; past that, one line
 * per reason and interval stands for all its other keys (for at most
 * LOG_LIMIT_REASONS reasons; then one line for everything). A count kept
 * for a key that is pushed out of the table is lost. So a flood writes a bounded
 * number of lines however long it lasts, and cannot rotate history out of
 * the log. fmt is the reason: pass a literal. */
#define LOG_LIMIT_INTERVAL_MS (60 * 1000LL)
#define LOG_LIMIT_KEYS 64
#define LOG_LIMIT_REASONS 32
void log_limited(enum log_level l, const char *key, const char *fmt, ...) _printf_(3, 4);

/* The decision behind log_limited, as data (tests use their own clock). */
struct log_limiter;
int log_limiter_new(int64_t interval_ms, struct log_limiter **ret);
void log_limiter_free(struct log_limiter *lim);
/* Whether a line for (reason, key) is written at now; when it is,
 * *ret_suppressed is how many were not since the last one that was. */
bool log_limiter_admit(struct log_limiter *lim, const char *reason, const char *key, int64_t now,
                       uint64_t *ret_suppressed);

/* A size-rotated append-only file, also used for the organism's log. */
struct rotlog;
int rotlog_open(const char *path, size_t max_bytes, int keep, struct rotlog **ret);
void rotlog_write(struct rotlog *l, const char *data, size_t len);
void rotlog_free(struct rotlog *l);
/* Copies what is read from fd into l until end of file (or a read error
 * other than EINTR). With max_line > 0, a line longer than that keeps its
 * first max_line bytes and ends in " [... N bytes not logged]". Blocks: run
 * it in its own thread or process. fd and l stay the caller's. */
void rotlog_pump(struct rotlog *l, int fd, size_t max_line);
