/* ctl.h — the HTTP side of the control plane (libmicrohttpd is used only in
 * this module): Host allowlist, Fetch Metadata guards, one-time sign-in
 * links, sessions, API tokens, the route table under /_seed, the embedded UI
 * and the reverse proxy of / to the live organism. SPEC §7. */
#pragma once

#include "base/base.h"
#include <stdint.h>

struct db;
struct organism;

struct ctl_config {
        const char *addr;              /* "HOST:PORT"; if the port is taken the next free one (up to +20) */
        char *const *allowed_hosts;    /* extra Host names from seed.yaml (borrowed) */
        const char *seed_name;         /* for the page title/theme */
        const char *seed_dir;          /* absolute; logs are read from .seed/logs */
        struct db *kdb;                /* kernel-memory DB (borrowed) */
        const char *cli_token;         /* the CLI token (borrowed; never sent to a browser) */
        const char *session_key;       /* secret for the API token derivation (borrowed) */
        struct organism *organism;     /* borrowed; may be NULL in tests */
        /* Fills *ret_json with the status object (caller frees). */
        int (*status)(void *userdata, char **ret_json);
        void *userdata;
};

struct ctl;

int ctl_start(const struct ctl_config *cfg, struct ctl **ret);
/* The port actually bound. */
uint16_t ctl_port(const struct ctl *c);
void ctl_stop(struct ctl *c);

/* Creates a one-time sign-in link token (>= 128 random bits, 15 minutes,
 * single use, at most 20 live); stores only its hash. Caller frees. */
int ctl_login_link_new(struct db *kdb, char **ret_token);
/* API token of a session cookie value: HMAC-SHA-256(session_key, cookie). */
void ctl_api_token(const char *session_key, const char *cookie, char out[65]);
/* The per-Seed cookie name derived from the session key, e.g. "seed_3fa1c2d4". */
void ctl_cookie_name(const char *session_key, char out[32]);
