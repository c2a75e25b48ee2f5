/* ctl.h — the HTTP side of the control plane (libmicrohttpd is used only in
 * this module): Host allowlist, Fetch Metadata guards, one-time sign-in
 * links, sessions, API tokens, the route table under /_seed, the embedded UI
 * and the reverse proxy of / to the live organism. SPEC §7. */
#pragma once

#include "base/base.h"
#include <stdint.h>
#include <sys/types.h>

struct ctl_listen;
struct db;
struct organism;
struct ask_drafts;

/* One call to an API route that another module adds (see api_routes). All
 * of it is borrowed for the duration of the handler. */
struct ctl_api_call {
        const char *method;
        const char *path;              /* e.g. "/_seed/api/evolutions/evo_12/cancel" */
        const char *param;             /* the segment matched by "*", or NULL */
        const char *query;             /* raw query string, or NULL */
        const char *body;              /* request body (JSON for state-changing calls), NUL-terminated */
        size_t body_len;
        bool via_cli;                  /* authenticated with the CLI token, not a browser session */
        const char *session_id;        /* the browser session's public id, or NULL */
};

/* A response body produced while it is sent, on the connection's own
 * thread. read blocks until it has bytes (at most max, copied into buf) and
 * returns their count (> 0), or a negative value to end the response (it
 * should return within about 15 s, e.g. with a keep-alive comment, so a
 * client that went away is noticed; after 60 s without a byte sent the
 * connection is closed as idle). close is called once, always, when the
 * response ends or is never sent. */
struct ctl_stream {
        const char *content_type;      /* static string */
        const char *disposition;       /* a Content-Disposition header, or NULL (owned by ctx) */
        uint64_t size;                 /* the body's length when known (Content-Length: a body cut
                                        * short is then seen as such), else 0 (chunked) */
        ssize_t (*read)(void *ctx, char *buf, size_t max);
        void (*close)(void *ctx);
        void *ctx;
};

/* An extra /_seed/api route. Every one needs API auth (session cookie +
 * X-Seed-Token, or the CLI token); state-changing methods get the same-origin,
 * JSON and 1 MiB rules. pattern is a full path where "*" matches one segment,
 * e.g. "/_seed/api/evolutions/ * /cancel" (without the spaces). The handler
 * fills *ret_status and *ret_json (caller frees; errors as {"error": "..."})
 * and returns 0, or -errno for a 500. */
struct ctl_api_route {
        const char *method;
        const char *pattern;
        int (*handler)(void *userdata, const struct ctl_api_call *call, int *ret_status,
                       char **ret_json);
        /* A streaming GET route (e.g. Server-Sent Events) sets this instead
         * of handler. It either fills *ret_stream (answered 200 with
         * stream->content_type, no Content-Length) or, to refuse, *ret_status
         * and *ret_json as handler does. */
        int (*stream)(void *userdata, const struct ctl_api_call *call, int *ret_status, char **ret_json,
                      struct ctl_stream *ret_stream);
};

struct ctl_config {
        /* "HOST:PORT", bound with ctl_listen_open() (never another port
         * when it is taken: ctl_start fails) unless listen is set. */
        const char *addr;
        /* Sockets to serve instead (the supervisor's, see listen.h). Borrowed:
         * ctl_start keeps its own duplicates. */
        const struct ctl_listen *listen;
        char *const *allowed_hosts;    /* extra Host names from seed.yaml (borrowed) */
        /* The control plane's own origin (server.control_host, e.g.
         * "seed.localhost"): the page, the API, sign-in links and the form
         * answer only on this host, with SameSite=Strict host-only cookies;
         * /_seed navigations on any other host are redirected to it, and the
         * organism is never served on it. NULL or "": the same-origin
         * fallback (/_seed beside the organism on every allowed host, Lax
         * cookies). Borrowed. */
        const char *control_host;
        const char *seed_name;         /* for the page title/theme */
        const char *seed_dir;          /* absolute; logs are read from .seed/logs */
        struct db *kdb;                /* kernel-memory DB (borrowed) */
        const char *cli_token;         /* the CLI token (borrowed; never sent to a browser) */
        const char *session_key;       /* secret for the API token derivation (borrowed) */
        /* Password sign-in (SEED_OWNER_USER, SEED_OWNER_PASSWORD). Borrowed;
         * ctl_start keeps only a keyed hash of them, so the caller should wipe
         * its copy of the password once ctl_start returned. No password (or
         * one shorter than 12 characters, which is logged as an error): only
         * sign-in links work. An empty user is "owner". */
        const char *owner_user;
        const char *owner_password;
        /* SEED_TRUSTED_PROXIES: how many proxies are in front ("1"), or their
         * addresses/CIDRs ("127.0.0.1, 10.0.0.0/8"). NULL or empty:
         * X-Forwarded-For is ignored. Malformed: logged, and ignored too.
         * Borrowed. */
        const char *trusted_proxies;
        struct organism *organism;     /* borrowed; may be NULL in tests */
        /* When set, the proxy connects to this Unix socket instead of
         * organism_socket(organism): a seam for tests (a fake organism).
         * Borrowed. */
        const char *organism_socket_override;
        /* At most this many client connections at once (0: 256, the most
         * allowed; at least 34). 32 of them are kept for the CLI token and
         * signed-in sessions; of the rest, half may be anonymous (no
         * authenticated request yet: the oldest are closed past that, and
         * past 16 per client) and half proxied to the organism (503 at once
         * past that). Tests use a small limit. */
        unsigned connection_limit;
        /* The kernel runs inside its Seed's container (seed-kernel
         * --in-container): connections from the container's own addresses,
         * loopback included, are refused at accept (own-addrs.h). */
        bool refuse_own_addresses;
        /* Told of every 5xx answer of the live organism passed on (or made
         * for it: 502, 504) to a client of /, with the request's method and
         * path (the doctor counts them: kernel/health). Only 5xx answers
         * call it, so the proxy's common path pays nothing. Called from
         * the connection's thread; must be quick. May be NULL. */
        void (*on_5xx)(void *userdata, const char *method, const char *path, int status);
        void *on_5xx_userdata;
        /* Fills *ret_json with the status object (caller frees). */
        int (*status)(void *userdata, char **ret_json);
        void *userdata;
        /* More API routes, ending with a zeroed entry; built-in routes win.
         * Borrowed (typically a static table); handlers get api_userdata. */
        const struct ctl_api_route *api_routes;
        /* What api_routes' handlers get as userdata; NULL: userdata. */
        void *api_userdata;
        /* Point and ask's pictures (ask/drafts.h; borrowed, may be NULL): the
         * owner's browser leaves them at POST /_seed/ask-draft. */
        struct ask_drafts *drafts;
};

struct ctl;

/* Checks the route tables as data, so that a route cannot land without its
 * decision: every built-in route has a method, a /_seed path, a handler and
 * an auth level (the enum's zero value is "unset" and is refused at run
 * time too); every route of table (ending with a zeroed entry) has a
 * method, a /_seed/api/ path and exactly one of handler or stream (their
 * auth is the API's by construction). -EINVAL with *ret_error (caller
 * frees) naming the first bad entry. ctl_start refuses a bad api_routes. */
int ctl_routes_check(char **ret_error);
int ctl_api_routes_check(const struct ctl_api_route *table, char **ret_error);

/* Serves cfg->listen, or binds cfg->addr (ctl/listen.h: -EADDRINUSE, logged,
 * when the port is taken on either loopback family). */
int ctl_start(const struct ctl_config *cfg, struct ctl **ret);
/* The port served (the same on every socket). */
uint16_t ctl_port(const struct ctl *c);
void ctl_stop(struct ctl *c);

/* The owner's preview of evolution evo_id (its candidate: generation) runs
 * behind the bridge socket at socket_path (copied), or none (NULL): the
 * owner's browser, and only it, is sent there once it entered the preview
 * (ctl/preview.h), and its pages get the preview bar. Every earlier preview
 * link and cookie stops working. Thread-safe. */
void ctl_preview_set(struct ctl *c, const char *evo_id, int generation, const char *socket_path);

/* Creates a one-time sign-in link token (>= 128 random bits, 15 minutes,
 * single use, at most 20 live); stores only its hash. Caller frees. */
int ctl_login_link_new(struct db *kdb, char **ret_token);
/* API token of a session cookie value: HMAC-SHA-256(session_key, cookie). */
void ctl_api_token(const char *session_key, const char *cookie, char out[65]);
/* The per-Seed cookie name derived from the session key, e.g. "seed_3fa1c2d4". */
void ctl_cookie_name(const char *session_key, char out[32]);
