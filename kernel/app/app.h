/* app.h — the kernel daemon: loads seed.yaml, takes the secrets from the CLI,
 * starts the Seed's PostgreSQL (private, or the external one of
 * SEED_DATABASE_URL / database.url), the live organism and the control plane,
 * and stops them all cleanly on SIGTERM/SIGINT. */
#pragma once

#include "base/base.h"
#include "ctl/listen.h"

/* Exit codes of the kernel, read by `seed run`. */
#define APP_EXIT_OK 0
#define APP_EXIT_FAILURE 1
#define APP_EXIT_USAGE 2
#define APP_EXIT_RESTART 75 /* rebuild me from my source and restart */

struct app_options {
        const char *seed_dir;    /* the Seed's folder */
        const char *addr;        /* overrides server.addr; NULL = from seed.yaml */
        int secrets_fd;          /* pipe from the CLI with the secrets; -1 = none */
        const char *bridge_path; /* the seed-bridge binary built with this kernel */
        char *const *hide_paths; /* the owner's config (env files): hidden in every sandbox */
        /* The supervisor's listening sockets (--listen-fd), served instead of
         * binding addr, which then only names them. */
        int listen_fds[CTL_LISTEN_MAX];
        size_t n_listen_fds;
        /* --in-container: the kernel runs inside its Seed's container, so a
         * connection from the container's own addresses (loopback included)
         * comes from inside it and is refused (ctl/own-addrs.h). */
        bool in_container;
};

/* Runs the kernel until it is told to stop. Returns an APP_EXIT_* code. */
int app_run(const struct app_options *o);
/* Parses the seed-kernel command line and runs it. */
int app_main(int argc, char **argv);

/* Files under the Seed's .seed/ that the CLI reads too. */
/* {"pid", "url" (where the CLI connects), "host" (the Host header the control
 * plane answers to, "" in the same-origin fallback), "control_url" (what the
 * owner opens), "port", "started_at", "addr" (the address listened on, as
 * given: "0.0.0.0:8080")} */
#define APP_STATE_FILE ".seed/kernel.json"
#define APP_CONTROL_TOKEN_FILE ".seed/control-token"
