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
        SB_BIND_TRY,     /* src -> dest, writable, skipped if src is missing */
        SB_REMOUNT_RO,   /* make the mount at dest read-only (after every mount) */
};

struct sandbox_op {
        enum sandbox_op_kind kind;
        char *src, *dest;
};

#define SANDBOX_KEEP_FDS_MAX 8

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
        const char *bridge_path;   /* host path of seed-bridge, at /run/seed/bridge */
        const int *keep_fds;       /* fds the command inherits at the same numbers
                                    * (e.g. the organism's listening socket);
                                    * each >= 3 and open; borrowed, copied */
        size_t n_keep_fds;         /* at most SANDBOX_KEEP_FDS_MAX */
        int port;                  /* PORT inside (0 = unset) */
        char *const *extra_env;    /* more NAME=VALUE entries (not secrets) */
        const char *cwd;           /* inside the sandbox; default /workspace */
        char *const *hide_paths;   /* more host paths kept invisible (the owner's
                                    * config): covered wherever a mount shows them */
};

/* A live or preview sandbox has no writable host directory: the workspace is
 * read-only and so is its root, so it cannot even create a mount point's
 * worth of state outside /tmp and its home. In every profile the tmpfs that
 * hide things (.seed/, the live Seed's folder, the owner's config) are
 * read-only. The live app's only channel to the kernel is the fds passed on
 * purpose (keep_fds): the kernel binds its socket, never the sandbox. */
struct sandbox_policy {
        enum sandbox_profile profile;
        struct sandbox_op *ops;
        size_t n_ops;
        char **env;               /* the complete environment, NAME=VALUE */
        bool share_net;
        int keep_fds[SANDBOX_KEEP_FDS_MAX]; /* passed to the command; not owned */
        size_t n_keep_fds;
};

const char *sandbox_profile_name(enum sandbox_profile p);
/* Derives the policy (reads the host: system dir links, which evolvable
 * dirs exist, what must be hidden). Evolvable dirs missing on the host are
 * skipped; one that is a symlink or file is refused (-ENOTDIR). Caller frees
 * *ret with sandbox_policy_free(). */
int sandbox_policy_build(const struct sandbox_spec *spec, struct sandbox_policy **ret);
void sandbox_policy_free(struct sandbox_policy *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct sandbox_policy *, sandbox_policy_free)
/* The full bwrap argv running cmd (NULL-terminated) under the policy.
 * seccomp_fd >= 0 adds --seccomp. Caller frees with strv_free(). */
int sandbox_policy_argv(const struct sandbox_policy *p, const char *bwrap, int seccomp_fd,
                        char *const *cmd, char ***ret);

/* The fds in p->keep_fds reach cmd at the same numbers (bwrap passes
 * inherited fds on); the caller keeps owning them and may close its copies
 * once the sandbox has started. */

/* Runs cmd under the policy to completion (timeout kills the process group,
 * output capped head+tail at 1 MiB + 1 MiB). */
int sandbox_run(const struct sandbox_policy *p, char *const *cmd, int timeout_ms,
                struct proc_result *ret);
/* Starts cmd under the policy; stdout+stderr go to out_fd. Only bwrap's pid
 * is returned: long-running sandboxes should use sandbox_start(). */
int sandbox_spawn(const struct sandbox_policy *p, char *const *cmd, int out_fd, pid_t *ret_pid);

/* A started sandbox. Killing bwrap alone is racy (a sandbox still being set
 * up survives its parent), so the sandbox's own pid 1 is tracked too. */
struct sandbox_child {
        pid_t pid;       /* bwrap, leading its own process group; the caller reaps it */
        pid_t init_pid;  /* the sandbox's pid 1 as seen from the host; 0 if none */
        int init_pidfd;  /* pidfd of init_pid, or -1 */
};
/* Like sandbox_spawn, and waits (up to 30 s) until the sandbox exists.
 * Release with sandbox_child_done() after reaping. */
int sandbox_start(const struct sandbox_policy *p, char *const *cmd, int out_fd, struct sandbox_child *ret);
/* SIGKILL tears the whole sandbox down; any other signal goes to the
 * processes inside (their process group), not to bwrap. -ESRCH if gone. */
int sandbox_signal(const struct sandbox_child *c, int sig);
/* SIGTERM inside, SIGKILL after grace_ms; reaps bwrap, returns its exit code. */
int sandbox_stop(struct sandbox_child *c, int grace_ms);
void sandbox_child_done(struct sandbox_child *c);

/* Start-up doctor: 0 if bwrap exists and can create namespaces here;
 * otherwise -errno and *ret_message (caller frees) says what is wrong and
 * how to fix it. Refuses to run as root (-EPERM). */
int sandbox_check(char **ret_message);
/* Path of bwrap, or NULL when missing. Borrowed. */
const char *sandbox_bwrap_path(void);
