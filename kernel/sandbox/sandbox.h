/* sandbox.h — every command an evolution runs, and the live organism, runs
 * under bubblewrap. A sandbox is first described as a policy (a typed list of
 * operations, unit-testable), then turned into a bwrap argv and executed.
 * Sandboxed processes never run as host uid 0: the kernel refuses to start a
 * sandbox when it is root.
 *
 * Every sandbox also gets, whatever its profile:
 *  - the seccomp filter of sandbox/seccomp.h (no ptrace, io_uring, bpf,
 *    mounts, new namespaces, …), loaded by bwrap just before the command;
 *  - its own network namespace with only lo: no interface to the outside,
 *    the host's addresses, its loopback or its abstract sockets. Its only way
 *    out, when the spec names the kernel's egress proxy, is a door the kernel
 *    makes inside it (sandbox/door.h): 127.0.0.1:EGRESS_PORT, announced as
 *    HTTPS_PROXY, where kernel/egress applies the profile's policy (the live
 *    organism and previews: the hosts the owner approved; evolution, build
 *    and test: the package registries and hosts approved for evolutions);
 *  - resource limits on its pid 1 before anything runs (bwrap waits on
 *    --block-fd meanwhile): SANDBOX_LIMIT_NPROC processes, no core dumps,
 *    files up to SANDBOX_LIMIT_FSIZE, and an OOM score that makes a memory
 *    hog inside die before the kernel. Ending pid 1 ends everything inside. */
#pragma once

#include "base/base.h"
#include "base/proc.h"
#include "egress/egress.h"
#include <sys/types.h>

enum sandbox_profile {
        SANDBOX_EVOLUTION, /* a command of an evolution: registries (egress), cache */
        SANDBOX_BUILD,     /* the organism's build: like evolution */
        SANDBOX_TEST,      /* the organism's tests: like build */
        SANDBOX_LIVE,      /* the live organism: approved hosts (egress), no cache */
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
        SB_RO_BIND_DATA, /* a read-only file at dest whose *contents* are src
                          * (passed to bwrap through a memfd) */
};

#define SANDBOX_LIMIT_NPROC 1024                    /* RLIMIT_NPROC: processes+threads per sandbox */
#define SANDBOX_LIMIT_FSIZE (1024ULL * 1024 * 1024) /* RLIMIT_FSIZE: 1 GiB */
#define SANDBOX_OOM_SCORE_ADJ 1000                  /* killed first when memory runs out */

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
        struct egress *egress;     /* the way out (borrowed, outlives the sandbox);
                                    * NULL: none, lo only and no door */
        const char *label;         /* names the sandbox at the proxy ("live",
                                    * "evolution evo_…"); default the profile's name */
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
        struct egress *egress;    /* borrowed; NULL: no door */
        enum egress_policy egress_policy; /* the door's policy, from the profile */
        char *label;              /* the door's label */
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

#define SANDBOX_DATA_MAX 2 /* SB_RO_BIND_DATA ops in one policy */

/* The fds one sandbox's bwrap is handed; -1 = none. */
struct sandbox_fds {
        int seccomp; /* the BPF program (--seccomp) */
        int info;    /* bwrap reports the sandbox's pid 1 here (--info-fd) */
        int block;   /* bwrap waits for a byte here before the command (--block-fd) */
        int data[SANDBOX_DATA_MAX]; /* contents of the SB_RO_BIND_DATA ops, in order */
};
#define SANDBOX_FDS_NONE                                                                                       \
        ((struct sandbox_fds){.seccomp = -1, .info = -1, .block = -1, .data = {-1, -1}})

/* The full bwrap argv running cmd (NULL-terminated) under the policy, with
 * the given fds (NULL = none; then a policy with SB_RO_BIND_DATA ops is
 * -EINVAL). Caller frees with strv_free(). The kernel itself passes the
 * options through a sealed memfd (--args), not the command line. */
int sandbox_policy_argv(const struct sandbox_policy *p, const char *bwrap, const struct sandbox_fds *fds,
                        char *const *cmd, char ***ret);

/* The fds in p->keep_fds reach cmd at the same numbers (bwrap passes
 * inherited fds on); the caller keeps owning them and may close its copies
 * once the sandbox has started. */

/* Runs cmd under the policy to completion (a timeout kills the whole
 * sandbox, output capped head+tail at 1 MiB + 1 MiB). Returns -errno only if
 * it could not start (root, no bwrap, no seccomp filter, limits refused). */
int sandbox_run(const struct sandbox_policy *p, char *const *cmd, int timeout_ms,
                struct proc_result *ret);

/* A started sandbox. Killing bwrap alone is racy (a sandbox still being set
 * up survives its parent), so the sandbox's own pid 1 is tracked too. */
struct sandbox_child {
        pid_t pid;       /* bwrap, leading its own process group; the caller reaps it */
        pid_t init_pid;  /* the sandbox's pid 1 as seen from the host; 0 if none */
        int init_pidfd;  /* pidfd of init_pid, or -1 */
        struct egress_door *door; /* its way out at the proxy, or NULL; closed by
                                   * sandbox_stop/_done once the sandbox is gone */
};
/* Starts cmd under the policy (stdout+stderr to out_fd, -1 = /dev/null) and
 * waits (up to 30 s) until the sandbox exists, its limits are set and its
 * door is open. If bwrap fails before creating the sandbox, init_pid is 0
 * and its exit code tells. Release with sandbox_child_done() after reaping. */
int sandbox_start(const struct sandbox_policy *p, char *const *cmd, int out_fd, struct sandbox_child *ret);
/* SIGKILL tears the whole sandbox down; any other signal goes to the
 * processes inside (their process group), not to bwrap. -ESRCH if gone. */
int sandbox_signal(const struct sandbox_child *c, int sig);
/* SIGTERM inside, SIGKILL after grace_ms; reaps bwrap, returns its exit code. */
int sandbox_stop(struct sandbox_child *c, int grace_ms);
void sandbox_child_done(struct sandbox_child *c);

/* Host paths hidden in every sandbox built from now on, on top of each
 * spec's hide_paths: the owner's config (the env files secrets came from).
 * Absolute, clean, at most SANDBOX_HIDE_MAX; copied. Call before any
 * sandbox is built (not thread-safe against sandbox_policy_build). */
#define SANDBOX_HIDE_MAX 16
int sandbox_hide_everywhere(char *const *paths);

/* The variables every policy sets itself (PATH, HOME, PORT, DATABASE_URL,
 * the proxy variables, …): extra_env may not set them, and a secret of that
 * name is never granted (kernel/outbound). Static data. */
const char *const *sandbox_fixed_env_names(size_t *ret_n);
bool sandbox_env_name_fixed(const char *name);

#define SANDBOX_BWRAP_PATH "/usr/bin/bwrap"

/* The start-up checks (check.c), one by one: `seed doctor` shows each as a
 * row. Each returns 0 when it passes; else -errno, with *ret_what (what is
 * wrong) and *ret_fix (how to fix it), both the caller's to free. The last
 * two refuse to run as root (-EPERM): sandboxes never do. */
int sandbox_check_bwrap(char **ret_what, char **ret_fix);   /* bubblewrap is installed */
int sandbox_check_userns(char **ret_what, char **ret_fix);  /* it can create a sandbox's namespaces here */
int sandbox_check_seccomp(char **ret_what, char **ret_fix); /* libseccomp builds the filter, bwrap loads it */

/* The kernel's start-up check: all three (one sandbox probe when all is
 * well): 0, or -errno and *ret_message (caller frees) saying in one message
 * what is wrong and how to fix it ("… Fix: …"). */
int sandbox_check(char **ret_message);
/* Path of bwrap, or NULL when missing. Borrowed. */
const char *sandbox_bwrap_path(void);
