/* organism.h — supervising the live organism: build it in a sandbox, run it
 * in a sandbox with its own network namespace behind the bridge, restart it
 * with backoff when it crashes, give up after more than 3 crashes in 10
 * minutes. The kernel reaches it only through the bridge's Unix socket. */
#pragma once

#include "base/base.h"

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
        const char *build_cmd;     /* shell command, e.g. "make -C organism build" */
        const char *run_cmd;       /* e.g. "organism/bin/server" */
        const char *health_path;   /* e.g. "/healthz" */
        int port;                  /* PORT inside the sandbox */
        const char *database_url;  /* live DB URL as seen in the sandbox; borrowed */
        const char *pg_socket_dir; /* host dir of PostgreSQL's socket */
        const char *bridge_path;   /* host path of the seed-bridge binary */
        const char *run_dir;       /* host dir for http.sock (.seed/run/organism) */
        const char *log_path;      /* .seed/logs/organism.log */
        char *const *evolvable;
};

struct organism;

int organism_new(const struct organism_config *cfg, struct organism **ret);
/* Builds and starts it in a supervising thread; returns at once. */
int organism_start(struct organism *o);
/* Stops it (SIGTERM, then SIGKILL after 10 s) and the supervising thread. */
void organism_stop(struct organism *o);
void organism_free(struct organism *o);
enum organism_state organism_state(struct organism *o);
const char *organism_state_name(enum organism_state s);
/* Host path of the bridge socket. Borrowed. */
const char *organism_socket(struct organism *o);
/* Waits until running (healthy) or down; -ETIMEDOUT. */
int organism_wait_ready(struct organism *o, int timeout_ms);
