/* organism.h — supervising the live organism: build it in a sandbox, run it
 * in a sandbox with its own network namespace behind the bridge, restart it
 * with backoff when it crashes or, once healthy, stops answering its health
 * check (3 checks in a row, every 5 s, 2 s each: it hangs or no longer reads
 * its socket), give up after more than 3 of those in 10 minutes. The kernel reaches it only through the bridge's Unix socket, which
 * the kernel itself binds (in run_dir, never visible to a sandbox) and hands
 * to the bridge as a listening fd. */
#pragma once

#include "base/base.h"
#include "base/json.h"

struct egress;

enum organism_state {
        ORGANISM_STOPPED,
        ORGANISM_BUILDING,
        ORGANISM_STARTING,
        ORGANISM_RUNNING,
        ORGANISM_CRASHED,     /* restarting after a crash (backoff) */
        ORGANISM_DOWN,        /* gave up: too many crashes, or build failed */
};

struct organism_config {
        const char *seed_dir;      /* absolute */
        const char *workspace;     /* built and run from here (absolute); NULL =
                                    * seed_dir. E.g. an export of the live
                                    * generation while the owner's commits on
                                    * main are not a generation. */
        const char *build_cmd;     /* shell command, e.g. "make -C organism build" */
        const char *run_cmd;       /* e.g. "organism/bin/server" */
        const char *health_path;   /* e.g. "/healthz" */
        int port;                  /* PORT inside the sandbox */
        const char *database_url;  /* live DB URL as seen in the sandbox; borrowed */
        const char *pg_socket_dir; /* host dir of PostgreSQL's socket */
        const char *bridge_path;   /* host path of the seed-bridge binary */
        const char *run_dir;       /* host dir for http.sock, the kernel's only (0700,
                                    * ours); default <seed_dir>/.seed/organism */
        const char *log_path;      /* .seed/logs/organism.log */
        char *const *evolvable;    /* writable in the build sandbox; NULL = organism/ */

        /* Optional; 0/NULL means the default. Every string is copied. */
        const char *cache_dir;     /* build cache; default <seed>/.seed/cache */
        struct egress *egress;     /* the sandboxes' way out (borrowed); NULL: none */
        const char *label;         /* names its sandboxes at the proxy: "live",
                                    * "preview evo_…"; default "organism" */
        char *const *extra_env;    /* more NAME=VALUE for the live sandbox only */
        int backoff_ms_base;       /* first restart delay, doubling up to 30 s; 1000 */
        int health_timeout_ms;     /* STARTING -> healthy deadline; 60000 */
        int build_timeout_ms;      /* the build's deadline; 15 minutes */
        /* Called on each state change, just before the new state becomes
         * visible (mostly from the supervising thread; no lock held). Must
         * not call organism_start/stop/restart/free. */
        void (*on_state)(void *userdata, enum organism_state state);
        void *userdata;
};

struct organism;

int organism_new(const struct organism_config *cfg, struct organism **ret);
/* Builds and starts it in a supervising thread; returns at once. */
int organism_start(struct organism *o);
/* Stops it (SIGTERM, then SIGKILL after 10 s) and the supervising thread.
 * Start, stop and restart are called from one thread at a time. */
void organism_stop(struct organism *o);
/* Replaces the live sandbox's extra environment (entries copied; the old
 * ones wiped) and, if the app is running, restarts it with the new one: its
 * sandbox ends and starts again without a rebuild or a crash counted.
 * Thread-safe. The app only (the kernel calls it for the live organism's
 * granted secrets); never for previews or checks. */
int organism_set_env(struct organism *o, char *const *env);
/* Stop, then start again with a fresh crash window (e.g. after DOWN). */
int organism_restart(struct organism *o);
/* The folder the next start builds and runs from (absolute; NULL = the
 * Seed's folder). Only while stopped: -EBUSY otherwise. Copied. */
int organism_set_workspace(struct organism *o, const char *workspace);
/* The folder it builds and runs from. Borrowed, valid until the next
 * organism_set_workspace(). */
const char *organism_workspace(struct organism *o);
void organism_free(struct organism *o);
enum organism_state organism_state(struct organism *o);
const char *organism_state_name(enum organism_state s);
/* Host path of the bridge socket. Borrowed. Connect with organism_connect(). */
const char *organism_socket(struct organism *o);
/* Connects to a bridge socket at socket_path (as organism_socket() returns)
 * and checks that this very process is the one listening on it: its
 * directory must be ours with no group/other access and not a symlink
 * (-EPERM, -ENOTDIR), the entry a socket, not a symlink (-ELOOP, -ENOTSOCK),
 * and the listener's credentials (SO_PEERCRED, recorded at listen()) our
 * pid (-EPERM). Any path length works. timeout_ms > 0 bounds the connect
 * (a full backlog: -ETIMEDOUT); timeout_ms < 0 never waits (a full
 * backlog: -EAGAIN) and returns an O_NONBLOCK fd, else a blocking one
 * (O_CLOEXEC either way); the caller closes it. Logs only a refused peer. */
int organism_connect(const char *socket_path, int timeout_ms, int *ret_fd);
/* For a client that connects by itself (kernel/httpc): organism_connect()'s
 * checks of the directory and the entry, then the address to connect to in
 * *ret_path ("/proc/self/fd/N/name", any Seed path length), valid while
 * *ret_dirfd is open. Caller closes *ret_dirfd and frees *ret_path, and
 * checks the connection with organism_peer_check(). Does not log. */
int organism_socket_open(const char *socket_path, int *ret_dirfd, char **ret_path);
/* 0 if this very process listens on the connected socket fd (SO_PEERCRED),
 * else -EPERM (logged, naming socket_path) or getsockopt's -errno. */
int organism_peer_check(int fd, const char *socket_path);
/* Waits until running (healthy): 0; down: -EIO; stopped: -ESRCH;
 * otherwise -ETIMEDOUT. */
int organism_wait_ready(struct organism *o, int timeout_ms);
/* One health probe: GET path (absolute, else -EINVAL) through kernel/httpc
 * over the bridge socket at socket_path, with organism_connect()'s checks
 * (organism_socket_open(), organism_peer_check()): 2 s to connect, 2 s more
 * for the answer. 0 if it answers 2xx; -EIO for any other answer or none
 * once connected; the connection's -errno otherwise. For verifying previews. */
int organism_probe(const char *socket_path, const char *path);
/* Crashes within the current 10-minute window. */
int organism_crash_count(struct organism *o);
/* Why it is in its state ("build failed", "crashed too often", …), for the
 * control plane. Caller frees *ret. The details are in the organism log. */
int organism_reason(struct organism *o, char **ret);

/* ---- one HTTP request to an organism (http.c) ---- */
#define ORGANISM_HTTP_TIMEOUT_MS (10 * 1000)
#define ORGANISM_HTTP_CONNECT_TIMEOUT_MS 2000
#define ORGANISM_HTTP_RESPONSE_MAX (1024 * 1024) /* body bytes kept (the rest is cut, and said so) */
#define ORGANISM_HTTP_HEADERS_MAX (64 * 1024)    /* header bytes shown */
struct organism_http_request {
        const char *method;     /* an HTTP token */
        const char *path;       /* "/…", no spaces or controls: sent as given */
        json_t *headers;        /* {"Name": "value"} or NULL; borrowed. Host, Connection,
                                 * Content-Length, Transfer-Encoding and Expect are the kernel's */
        const char *body;       /* or NULL */
        int timeout_ms;         /* for the whole answer; 0: ORGANISM_HTTP_TIMEOUT_MS */
};
/* Sends req over the bridge socket at socket_path (organism_socket()) with
 * organism_connect()'s checks, for the model's http_request (a preview) and
 * call_api (the live organism). 0: *ret_text (caller frees) is the answer:
 * the status line, the headers (names lower-cased, at most
 * ORGANISM_HTTP_HEADERS_MAX bytes), a blank line, the body (at most
 * ORGANISM_HTTP_RESPONSE_MAX bytes). Else *ret_error (caller frees; may be
 * NULL) says why: -EINVAL a bad method, path or header; -ECONNREFUSED not
 * reachable (or not ours); -ETIMEDOUT no complete answer within
 * req->timeout_ms (default ORGANISM_HTTP_TIMEOUT_MS); -EPROTO not HTTP. Does not log. */
int organism_http(const char *socket_path, const struct organism_http_request *req, char **ret_text,
                  char **ret_error);
