/* sandbox.h — every command an evolution runs, and the live organism, runs
 * under bubblewrap. A sandbox is first described as a policy (a typed list of
 * operations, unit-testable), then turned into a bwrap argv and executed.
 * Sandboxed processes never run as host uid 0: the kernel refuses to start a
 * sandbox when it is root. */
#pragma once

#include "base/base.h"
#include "base/proc.h"
#include <sys/types.h>

enum sandbox_profile {
        SANDBOX_EVOLUTION, /* a command of an evolution: network shared, cache */
        SANDBOX_BUILD,     /* the organism's build: network shared, cache */
        SANDBOX_TEST,      /* the organism's tests: like build */
        SANDBOX_LIVE,      /* the live organism: private network, no cache */
        SANDBOX_PREVIEW,   /* a preview of a generation: like live */
};

enum sandbox_op_kind {
        SB_RO_BIND,      /* src -> dest, read-only */
        SB_RO_BIND_TRY,  /* same, skipped if src is missing */
        SB_BIND,         /* src -> dest, writable */
        SB_TMPFS,        /* empty tmpfs at dest */
        SB_DIR,          /* mkdir dest */
        SB_SYMLINK,      /* symlink src at dest */
        SB_DEV,          /* --dev dest */
        SB_PROC,         /* --proc dest */
        SB_CHDIR,        /* --chdir dest */
};

struct sandbox_op {
        enum sandbox_op_kind kind;
        char *src, *dest;
};

/* What a caller wants; the policy is derived from it. Strings are borrowed. */
struct sandbox_spec {
        enum sandbox_profile profile;
        const char *seed_dir;      /* the live Seed's folder (hidden inside) */
        const char *workspace;     /* host dir shown at /workspace */
        char *const *evolvable;    /* writable dirs under the workspace ("organism/") */
        bool workspace_readonly;   /* live/preview: every workspace dir read-only */
        const char *pg_socket_dir; /* host dir with PostgreSQL's socket, or NULL */
        const char *database_url;  /* DATABASE_URL inside, or NULL */
        const char *cache_dir;     /* .seed/cache for evolution/build/test, or NULL */
        const char *run_dir;       /* host dir shown writable at /run/organism, or NULL */
        const char *bridge_path;   /* host path of seed-bridge, at /run/seed/bridge */
        int port;                  /* PORT inside (0 = unset) */
        char *const *extra_env;    /* more NAME=VALUE entries (not secrets) */
        const char *cwd;           /* inside the sandbox; default /workspace */
};

struct sandbox_policy {
        enum sandbox_profile profile;
        struct sandbox_op *ops;
        size_t n_ops;
        char **env;               /* the complete environment, NAME=VALUE */
        bool share_net;
};

const char *sandbox_profile_name(enum sandbox_profile p);
int sandbox_policy_build(const struct sandbox_spec *spec, struct sandbox_policy **ret);
void sandbox_policy_free(struct sandbox_policy *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct sandbox_policy *, sandbox_policy_free)
/* The full bwrap argv running cmd (NULL-terminated) under the policy.
 * seccomp_fd >= 0 adds --seccomp. Caller frees with strv_free(). */
int sandbox_policy_argv(const struct sandbox_policy *p, const char *bwrap, int seccomp_fd,
                        char *const *cmd, char ***ret);

/* Runs cmd under the policy to completion (timeout kills the process group,
 * output capped head+tail at 1 MiB + 1 MiB). */
int sandbox_run(const struct sandbox_policy *p, char *const *cmd, int timeout_ms,
                struct proc_result *ret);
/* Starts cmd under the policy; stdout+stderr go to out_fd. */
int sandbox_spawn(const struct sandbox_policy *p, char *const *cmd, int out_fd, pid_t *ret_pid);

/* Start-up doctor: 0 if bwrap exists and can create namespaces here;
 * otherwise -errno and *ret_message says what is wrong and how to fix it. */
int sandbox_check(char **ret_message);
/* Path of bwrap, or NULL when missing. Borrowed. */
const char *sandbox_bwrap_path(void);
