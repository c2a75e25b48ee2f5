/* supervisor.h — `seed run`'s supervisor: the process that builds the kernel
 * from the Seed's own source (into .seed/kernel-build, with a fixed
 * environment), starts it with the control plane's sockets (bound once, for
 * the supervisor's whole life: --listen-fd) and the owner's secrets (through
 * a pipe), and, each time a kernel ends, decides what comes next.
 *
 * Four parts:
 *   policy.c      what follows a kernel's end, as a table of rules (pure, no
 *                 processes: tests check the data itself);
 *   control.c     the control channel: `seed restart` asks the running
 *                 supervisor for a restart with more secrets;
 *   build.c       the kernel's binaries: a fresh build, or the last good one
 *                 (.seed/kernel-good, kept once a kernel ran 60 s);
 *   supervisor.c  the process work: the run lock, the loop that starts and
 *                 waits for kernels and carries out the decisions, stop
 *                 signals, the detached output pump into supervisor.log.
 * The CLI (kernel/cli/run.c) only parses arguments, prints and calls these. */
#pragma once

#include "base/base.h"
#include "ctl/listen.h"

#include <sys/types.h>

struct secrets;

/* A kernel that ran this long counts as good: its binaries are kept as the
 * last good kernel, and a crash after that is restarted. */
#define SUPERVISOR_GOOD_AFTER_MS (60 * 1000)
/* How long a stopping kernel gets before it is killed. */
#define SUPERVISOR_STOP_GRACE_MS (30 * 1000)
/* Crashes of good kernels restarted in a row (since the last rebuild). */
#define SUPERVISOR_MAX_CRASHES 3
/* The pause before the n-th restart after a crash is n times this. */
#define SUPERVISOR_CRASH_PAUSE_MS (2 * 1000)

/* The supervisor's own exit codes (`seed run` in the foreground returns them). */
#define SUPERVISOR_EXIT_OK 0
#define SUPERVISOR_EXIT_FAILURE 1

/* ---- the policy (policy.c) ---- */

enum supervisor_end {
        SUPERVISOR_END_STOPPED,      /* the Seed was asked to stop, and the kernel has stopped */
        SUPERVISOR_END_EXITED,       /* exit 0 (APP_EXIT_OK): the kernel stopped by itself */
        SUPERVISOR_END_RESTART,      /* exit 75 (APP_EXIT_RESTART): rebuild me from my source */
        SUPERVISOR_END_CRASHED,      /* any other exit code, or a signal */
        SUPERVISOR_END_BUILD_FAILED, /* no kernel ran: building it from the source failed */
        SUPERVISOR_END_ASKED,        /* `seed restart` asked, and the kernel has stopped */
        _SUPERVISOR_END_MAX,
};

enum supervisor_action {
        SUPERVISOR_STOP,      /* the supervisor ends, SUPERVISOR_EXIT_OK */
        SUPERVISOR_REBUILD,   /* build the kernel from the source again and start that */
        SUPERVISOR_FALL_BACK, /* start the last good kernel; without one, give up */
        SUPERVISOR_RESTART,   /* start the same binaries again, after delay_ms */
        SUPERVISOR_GIVE_UP,   /* the supervisor ends, SUPERVISOR_EXIT_FAILURE */
        SUPERVISOR_START_AGAIN, /* start the same binaries again at once (not a crash: the count stays) */
        _SUPERVISOR_ACTION_MAX,
};

/* How the last kernel ended (or its build failed). */
struct supervisor_outcome {
        enum supervisor_end end;
        bool early;  /* it ran less than SUPERVISOR_GOOD_AFTER_MS */
        bool fresh;  /* its binaries were just built and have not run SUPERVISOR_GOOD_AFTER_MS yet */
        int crashes; /* crashed kernels already restarted since the last rebuild */
};

struct supervisor_decision {
        enum supervisor_action action;
        int delay_ms;    /* SUPERVISOR_RESTART: wait this long first; else 0 */
        const char *why; /* the rule's reason; static */
};

/* What a rule asks of a boolean (or of "crashes < SUPERVISOR_MAX_CRASHES"). */
enum supervisor_match { SUPERVISOR_ANY, SUPERVISOR_YES, SUPERVISOR_NO };

/* One row of the policy: the first row that matches an outcome decides. */
struct supervisor_rule {
        enum supervisor_end end;
        enum supervisor_match early, fresh;
        enum supervisor_match crashes_left; /* YES: crashes < SUPERVISOR_MAX_CRASHES */
        enum supervisor_action action;
        const char *why;
};

/* The rules, exported so tests check the table itself. Static data. */
extern const struct supervisor_rule supervisor_rules[];
extern const size_t supervisor_n_rules;

/* Pure: the first rule matching o. An outcome no rule matches (an end out of
 * range) gives up. */
struct supervisor_decision supervisor_decide(const struct supervisor_outcome *o);
/* A kernel's exit code (as from proc_exit_code) as an end. */
enum supervisor_end supervisor_end_of_exit(int exit_code);
/* "stop", "rebuild", …; static. */
const char *supervisor_action_name(enum supervisor_action a);

/* ---- the kernel's binaries (build.c) ---- */

struct supervisor_bins {
        char *kernel, *bridge; /* owned paths */
        bool fresh;            /* built just now, not yet known good */
};
/* Frees the paths; b is empty again. */
void supervisor_bins_done(struct supervisor_bins *b);
/* Where the kernel is built, relative to the Seed's folder: on the host, and
 * inside its container (the folder is /seed there: a build directory records
 * absolute paths, so each place keeps its own). */
#define SUPERVISOR_BUILD_DIR ".seed/kernel-build"
#define SUPERVISOR_BUILD_DIR_CONTAINER ".seed/kernel-build-container"
/* meson setup (once) + ninja in build_dir (SUPERVISOR_BUILD_DIR*) with fixed
 * settings and environment; the output goes to .seed/logs/kernel-build.log.
 * On success *ret holds the fresh binaries (free with supervisor_bins_done). */
int supervisor_bins_build(const char *seed_dir, const char *build_dir, struct supervisor_bins *ret);
/* The last good binaries in .seed/kernel-good, or -ENOENT (*ret may hold
 * paths either way: free with supervisor_bins_done). */
int supervisor_bins_last_good(const char *seed_dir, struct supervisor_bins *ret);
/* Builds; when that fails, does what the policy says of a failed build
 * (fall back to the last good binaries). Logs the outcome. */
int supervisor_bins_load(const char *seed_dir, const char *build_dir, struct supervisor_bins *ret);
/* The binaries ran SUPERVISOR_GOOD_AFTER_MS: copies them into
 * .seed/kernel-good and marks them not fresh (a failed copy is logged). */
void supervisor_bins_promote(const char *seed_dir, struct supervisor_bins *b);

/* ---- the control channel (control.c) ----
 *
 * A Unix socket at .seed/supervisor/control.sock (the directory 0700; .seed/
 * is hidden from every sandbox), listened on by the supervisor for its whole
 * life. One request per connection, from a peer of the supervisor's own uid
 * or root (SO_PEERCRED), whole within SUPERVISOR_CONTROL_TIMEOUT_MS:
 *   "restart\n"
 *   "hide <absolute path>\n"   (at most SUPERVISOR_CONTROL_HIDE_MAX: the env
 *                               files the secrets came from)
 *   "\n"
 *   the secrets in kernel/secrets' wire format ("NAME=VALUE\0"…, at most
 *   1 MiB), then the end of the stream (shutdown(SHUT_WR)).
 * The answer is one line: "ok <pid of the kernel being replaced>" or
 * "error <reason>". Secrets never travel in argv or the environment. */
#define SUPERVISOR_CONTROL_DIR ".seed/supervisor"
#define SUPERVISOR_CONTROL_SOCKET "control.sock"
#define SUPERVISOR_CONTROL_TIMEOUT_MS (10 * 1000)
/* How long the client waits for the answer: the supervisor may be building
 * a kernel (exit 75) before it reads the request. */
#define SUPERVISOR_CONTROL_ANSWER_MS (20 * 60 * 1000)
#define SUPERVISOR_CONTROL_HIDE_MAX 16 /* SANDBOX_HIDE_MAX: what a kernel takes */

struct supervisor_request {
        struct secrets *secrets; /* owned: the secrets sent */
        char **hide_paths;       /* owned strv: the paths sent */
};
void supervisor_request_done(struct supervisor_request *q);

/* Creates .seed/supervisor (0700) and listens there (non-blocking,
 * O_CLOEXEC); a stale socket of a dead supervisor is replaced (the caller
 * holds the run lock). *ret_fd is the caller's: close it with
 * supervisor_control_close(). */
int supervisor_control_open(const char *seed_dir, int *ret_fd);
/* Closes fd (-1: nothing) and removes the socket. */
void supervisor_control_close(const char *seed_dir, int fd);
/* Accepts one connection on listen_fd and reads its request. -EAGAIN when
 * nobody is waiting. A refused request (a stranger's: -EPERM; malformed or
 * over a limit: -EBADMSG, -E2BIG; too slow: -ETIMEDOUT) has been answered
 * and closed. On success *ret is the caller's (supervisor_request_done) and
 * so is *ret_conn, the connection to answer on with
 * supervisor_control_answer() (a line ending in '\n'). Nothing logs. */
int supervisor_control_read(int listen_fd, int *ret_conn, struct supervisor_request *ret);
int supervisor_control_answer(int conn, const char *line);

/* The client (`seed restart`): asks the supervisor of the Seed at seed_dir
 * to restart its kernel with s merged into its secrets (s and hide_paths
 * borrowed; s may be NULL: the same secrets). -ENOENT when no supervisor
 * listens. Refused: -EIO with *ret_error (the supervisor's reason; caller
 * frees). On success *ret_old_pid is the kernel being replaced. The caller
 * ignores SIGPIPE. */
int supervisor_request_restart(const char *seed_dir, const struct secrets *s, char *const *hide_paths,
                               pid_t *ret_old_pid, char **ret_error);

/* ---- the supervisor (supervisor.c) ---- */

struct supervisor_options {
        const char *seed_dir;    /* absolute; borrowed */
        const char *addr;        /* HOST:PORT the control plane listens on; borrowed */
        bool detach;             /* the supervisor's (and kernels') output goes to .seed/logs/supervisor.log */
        const struct secrets *secrets; /* borrowed; handed to every kernel through a pipe (NULL: none) */
        char *const *hide_paths; /* borrowed; every kernel hides them from its sandboxes (--hide) */
        bool in_container;       /* inside the Seed's container (kernel/container): kernels get
                                  * SEED_IN_CONTAINER=1, build in SUPERVISOR_BUILD_DIR_CONTAINER, and
                                  * no .seed/supervisor.pid is written (its pid means nothing outside) */
};

/* Takes .seed/run.lock (flock, held by the supervisor for its life): -EBUSY
 * when another supervisor holds it. *ret_fd is the caller's (O_CLOEXEC). */
int supervisor_lock(const char *seed_dir, int *ret_fd);

/* Binds o->addr (a taken port is an error: ctl_listen_open logs which
 * address), loads the binaries (supervisor_bins_load), and forks the
 * supervisor into a session of its own, which runs supervisor_loop until the
 * Seed is stopped and exits with SUPERVISOR_EXIT_*. lock_fd (from
 * supervisor_lock) is taken in every case: the supervisor keeps it, the
 * caller's copy is closed. *ret_pid: the supervisor, the caller's child. */
int supervisor_start(const struct supervisor_options *o, int lock_fd, pid_t *ret_pid);

/* Starts kernels from *b (replaced as the decisions say) with sockets
 * (borrowed; the same for every kernel) until one decision ends it: 0 for
 * SUPERVISOR_STOP, negative when giving up. Blocks SIGTERM, SIGINT, SIGHUP
 * (each stops the kernel, then the loop) and SIGCHLD in the caller. Listens
 * on the control channel meanwhile: a restart request stops the kernel
 * (SIGTERM, SUPERVISOR_STOP_GRACE_MS) and starts the next with the secrets
 * merged (the request's names override, the others are kept) and the
 * request's hide paths added. */
int supervisor_loop(const struct supervisor_options *o, struct supervisor_bins *b, const struct ctl_listen *sockets);

/* For the `seed run` that stays in the foreground: blocks SIGINT and SIGTERM
 * (collected by supervisor_wait), then waits for the supervisor pid to end,
 * asking it to stop when either comes. Returns its exit code. */
void supervisor_hold_stop_signals(void);
int supervisor_wait(pid_t pid);
