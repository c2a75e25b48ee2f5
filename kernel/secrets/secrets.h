/* secrets.h — the owner's secrets (model keys, tokens, SEED_OWNER_PASSWORD).
 *
 * They are passed at every start (`-e NAME[=VALUE]`, `--env-file F`), held
 * only in memory, and handed from the CLI to the kernel through a pipe (never
 * through argv or the environment). They never reach seed.yaml, git, the
 * database, logs, prompts or sandboxes. */
#pragma once

#include "base/base.h"

#define SECRETS_MAX 256
#define SECRETS_NAME_MAX 128
#define SECRETS_VALUE_MAX 65536

struct secrets;

int secrets_new(struct secrets **ret);
/* Frees and overwrites every value. Accepts NULL. */
void secrets_free(struct secrets *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct secrets *, secrets_free)
/* Sets (or replaces) name. Name must match [A-Za-z_][A-Za-z0-9_]*. */
int secrets_set(struct secrets *s, const char *name, const char *value);
/* Borrowed value or NULL. */
const char *secrets_get(const struct secrets *s, const char *name);
size_t secrets_count(const struct secrets *s);
/* The i-th name (borrowed), for listing names only. */
const char *secrets_name(const struct secrets *s, size_t i);
bool secrets_valid_name(const char *name);

/* Parses a `-e` argument: "NAME=VALUE", or "NAME" (value taken from the
 * caller's environment; an unset variable is an error). On error sets
 * *ret_error (caller frees). */
int secrets_add_arg(struct secrets *s, const char *arg, char **ret_error);
/* Parses an env file: NAME=VALUE lines, '#' comments, blank lines, an
 * optional "export " prefix, values optionally in '…' or "…" quotes. Errors
 * name the file and line. */
int secrets_add_env_file(struct secrets *s, const char *path, char **ret_error);

/* Sets every secret of from into s (a name s has already gets from's
 * value; the others are kept). All or nothing: on failure s is unchanged. */
int secrets_merge(struct secrets *s, const struct secrets *from);

/* Wire format over a pipe or socket: "NAME=VALUE\0" records. */
int secrets_write_fd(const struct secrets *s, int fd);
/* Reads until EOF (at most 1 MiB), validating every record. */
int secrets_read_fd(struct secrets *s, int fd);
