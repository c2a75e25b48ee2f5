/* doctor.h — `seed doctor`: the start-up checks as a table. Each row has a
 * name, whether a Seed needs it, the function that runs it and the fix to
 * print when it does not pass. The checks' logic lives with what they check
 * (kernel/sandbox: bubblewrap, user namespaces, seccomp, the sandboxes'
 * network; kernel/pg: the PostgreSQL binaries), where the kernel's start-up
 * calls it too; a row only runs one and words its result.
 */
#pragma once

#include "base/base.h"

enum doctor_status {
        DOCTOR_OK,   /* passes */
        DOCTOR_FAIL, /* a needed check that does not pass: `seed doctor` exits 1 */
        DOCTOR_WARN, /* an optional one that does not pass */
        DOCTOR_INFO, /* nothing wrong, something to know (no container engine) */
        _DOCTOR_STATUS_MAX,
};

struct cfg;

struct doctor_context {
        const char *seed_dir;  /* the Seed's folder (--dir, or the one we are in), or NULL; borrowed */
        const struct cfg *cfg; /* its seed.yaml, or NULL; borrowed */
};

struct doctor_result {
        enum doctor_status status;
        char *detail; /* owned: what was found */
        char *fix;    /* owned, or NULL: the row's fix applies */
};
void doctor_result_done(struct doctor_result *r);

/* A row's run function: 0 when it passes, DOCTOR_NOTE (> 0) for an
 * informational result, -errno when it does not pass. It sets
 * *ret_detail (always, on every outcome: caller frees) and may set
 * *ret_fix (a fix of its own, better than the row's; caller frees). */
#define DOCTOR_NOTE 1
typedef int (*doctor_run_fn)(const struct doctor_context *x, char **ret_detail, char **ret_fix);

struct doctor_check {
        const char *name;
        bool needed;       /* not passing is DOCTOR_FAIL (else DOCTOR_WARN) */
        bool per_seed;     /* about one Seed: run only when the context has one */
        doctor_run_fn run;
        const char *fix;   /* printed under a row that does not pass */
};

/* The rows, in the order they are shown. Static data; tests check it. */
extern const struct doctor_check doctor_checks[];
extern const size_t doctor_n_checks;

/* Runs one row: *ret is the caller's (doctor_result_done). */
int doctor_run(const struct doctor_check *c, const struct doctor_context *x, struct doctor_result *ret);
/* "ok", "FAIL", "warn", "info"; static. */
const char *doctor_status_name(enum doctor_status s);
