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

/* A size-rotated append-only file, also used for the organism's log. */
struct rotlog;
int rotlog_open(const char *path, size_t max_bytes, int keep, struct rotlog **ret);
void rotlog_write(struct rotlog *l, const char *data, size_t len);
void rotlog_free(struct rotlog *l);
