/* server.h — the state the ctl module's files share: the running server and
 * one request. Only server.c and proxy.c include libmicrohttpd. */
#pragma once

#include "base/base.h"
#include "base/buf.h"
#include "ctl/ctl.h"
#include "ctl/conns.h"
#include "ctl/http.h"
#include "ctl/limit.h"
#include "ctl/listen.h"
#include "ctl/own-addrs.h"
#include "ctl/owner.h"
#include "ctl/badge.h"
#include "ctl/upstream-pool.h"
#include "ctl/preview.h"
#include "ctl/proxy-policy.h"
#include "ctl/session-cache.h"

#include <netinet/in.h>
#include <pthread.h>

#define CTL_MAX_CONNECTIONS 256   /* the default and largest connection_limit */
/* Connections only signed-in requests may take: of connection_limit, the
 * rest is shared evenly between anonymous and proxied connections (conns.h),
 * e.g. 112 + 112 of 256. */
#define CTL_SEED_RESERVE 32
#define CTL_MAX_BODY (1024 * 1024)   /* /_seed request bodies; larger → 413 */
#define CTL_MAX_DRAIN (16 * 1024 * 1024) /* read and dropped past CTL_MAX_BODY before 413; then closed */
#define CTL_LINK_TTL_MS (15 * 60 * 1000LL)
#define CTL_MAX_LIVE_LINKS 20
/* Seconds a connection may take to send a complete request head, from its
 * start or from the end of its previous request: a total deadline
 * (ctl_conns_reap), and an idle timeout too. Short: a client that opens
 * connections and sends nothing, or a head a byte at a time, gives them up
 * soon. */
#define CTL_HEAD_TIMEOUT_S 10u
/* Idle seconds once the head is in: a request body arriving, an answer
 * being read (the event stream pings every 15 s). Proxied answers get the
 * proxy's own, longer limit (proxy.c). */
#define CTL_REQUEST_TIMEOUT_S 60u

struct ctl {
        /* Copies of the configuration's strings (secrets wiped on free). */
        char *seed_name, *seed_dir, *cli_token, *session_key, *organism_socket_override;
        char **allowed_hosts;
        char *control_host;            /* NULL: the same-origin fallback */
        struct db *kdb;
        struct organism *organism;
        int (*status)(void *userdata, char **ret_json);
        void *userdata;
        const struct ctl_api_route *api_routes;
        void *api_userdata;
        void (*on_5xx)(void *userdata, const char *method, const char *path, int status);
        void *on_5xx_userdata;

        char cookie_name[32];
        /* The owner's preview: the candidate's socket, tickets and grants (preview.h). */
        struct ctl_preview preview;
        /* The owner's badge: its switch, tickets and presence cookies (badge.h). */
        struct ctl_badge badge;
        /* Point and ask's pictures (borrowed; NULL: none are taken). */
        struct ask_drafts *drafts;
        /* Password sign-in (a keyed hash only) and the failed sign-in limits. */
        struct ctl_owner owner;
        /* Browser sessions the DB confirmed lately (session-cache.h). */
        struct ctl_session_cache sessions;
        struct ctl_proxies proxies;
        struct ctl_limiter *limiter;
        /* Every connection of every listening socket, in its pool (conns.h):
         * anonymous ones capped per client and in all, proxied ones capped,
         * the rest kept for signed-in requests; and their head deadlines,
         * enforced by the reaper thread. Peers that may be trusted proxies
         * are not capped per client (their clients share their address). */
        struct ctl_conns *conns;
        pthread_t reaper;
        bool reaper_started;
        pthread_cond_t reaper_wake;   /* with lock: ctl_stop wakes the reaper */
        /* Reaper thread only: late heads cut since the last log, and when. */
        unsigned reaper_cuts;
        int64_t reaper_logged_ms;

        /* The listening sockets (127.0.0.1 and [::1] for a loopback
         * address) are accepted by front, which gives each connection to
         * the daemon of large or small memory pools (front.h); both share
         * this state and its callbacks, and each has connection_limit on
         * its own (conns enforces the total). */
        struct ctl_front *front;
        struct MHD_Daemon *large, *small;
        struct ctl_loop *loop;         /* small's thread (loop.h) */
        /* Proxy states the loop keeps for its next requests (each holds an
         * 80 KiB buffer); the loop's thread only (proxy.c). */
        struct ctl_proxy *px_spare;
        unsigned n_px_spare;
        /* Requests the loop's fast path (fast.h) sent and left to the
         * daemon, by connection, until its request takes them (proxy.c);
         * the loop's thread only. */
        struct ctl_parked {
                int fd;
                struct ctl_proxy *px;  /* NULL: a free entry */
        } parked[CTL_MAX_CONNECTIONS];
        unsigned n_parked;
        struct ctl_fast *fast;
        size_t n_listen;
        uint16_t port;

        /* At most connection_limit connections (a thread each on the large
         * daemon, the loop for the small one); at most
         * proxy_limit of them proxy to the organism at once (conns.h), so a
         * hung organism or a flood of / cannot take the owner's way to
         * /_seed. */
        unsigned connection_limit, proxy_limit;

        /* Inside the Seed's container: the container's own addresses, whose
         * connections are refused (own-addrs.h). Front thread only. */
        bool refuse_own;
        struct ctl_own_addrs own;

        /* Open upstream sockets, shut down by ctl_stop so no thread blocks. */
        pthread_mutex_t lock;
        /* The logo refusal logged last (which candidate and why), so a
         * broken logo is logged once, not on every page that shows it; 0
         * once a logo is served or there is none. Under lock. */
        int logo_logged;
        int upstream[CTL_MAX_CONNECTIONS];
        bool stopping;
        /* Idle keep-alive connections to the organism's (and a preview's)
         * socket (upstream-pool.h); closed by ctl_stop. */
        struct ctl_upool pool;
        struct ctl_upool apool;        /* the same for the loop's non-blocking sockets */
};

enum ctl_req_kind { CTL_REQ_NEW, CTL_REQ_SEED, CTL_REQ_PROXY, CTL_REQ_DONE };

struct ctl_proxy;
struct ctl_route;
struct ctl_loop;

struct ctl_req {
        struct ctl *ctl;
        char *uri;                 /* raw request-target */
        char *path, *query;        /* split from uri; query NULL if none */
        char *method;
        struct ctl_hdrs hdrs;
        char client_ip[INET6_ADDRSTRLEN];
        enum ctl_req_kind kind;
        uint64_t conn_id;          /* its connection in ctl.conns (0: not counted) */
        enum ctl_body body_kind;   /* the body's framing (ctl_request_framing) */
        uint64_t body_len;         /* CTL_BODY_LENGTH */

        /* /_seed */
        const struct ctl_route *route;
        const struct ctl_api_route *api_route; /* one from ctl_config.api_routes */
        char *param;               /* the "*" segment of the route, if any */
        struct buf body;
        bool body_overflow;        /* past CTL_MAX_BODY: answered 413 once it is all in */
        uint64_t body_dropped;     /* bytes read since (and before) */
        bool via_cli;              /* authenticated with the CLI bearer token */
        char *session_id;          /* public id of the browser session */
        char *cookie_value;        /* the session cookie (secret) */
        struct ctl_resp pending;   /* answered from the head: queued on the next call */
        bool has_pending;

        /* / → organism */
        struct ctl_proxy *px;

        /* On the loop's daemon (NULL: a thread of its own): a /_seed
         * route runs on a worker while its connection waits (server.c). */
        struct ctl_loop *loop;
        bool seed_job_running;
        bool resumed_first;        /* resumed in libmicrohttpd's first call: one call more comes */
        int seed_result;           /* the worker's ctl_seed_begin/_finish result, in pending */
};

/* routes.c calls this once a request carried the CLI token or a signed-in
 * session: its connection leaves the anonymous pool (conns.h). */
void ctl_req_authenticated(struct ctl_req *q);
/* Logs what ctl_conns_open or ctl_conns_proxy_end reported (CTL_CONNS_CUT_*)
 * for a connection of client (NULL: not capped per client). */
void ctl_conns_log(struct ctl *c, int report, const struct ctl_client *client);

/* A peer address as text (IPv4 or IPv6; "unknown" for another family or NULL). */
void ctl_peer_ip(const struct sockaddr *sa, char out[INET6_ADDRSTRLEN]);
/* The client a peer address is capped for, or false when it is not capped
 * per client (an address family without one, a trusted proxy). */
bool ctl_capped_client(struct ctl *c, const struct sockaddr *sa, size_t len, struct ctl_client *ret);

/* Header lookup on the request (first value). */
const char *ctl_req_header(const struct ctl_req *q, const char *name);

/* routes.c: the /_seed side. begin runs on the request head: returns 1 when
 * *resp holds the answer, 0 when the body must be read first (then finish). */
int ctl_seed_begin(struct ctl_req *q, struct ctl_resp *resp);
int ctl_seed_finish(struct ctl_req *q, struct ctl_resp *resp);
/* Whether the request's Host is the control plane's own origin (always true
 * in the same-origin fallback). */
bool ctl_req_on_control_host(const struct ctl_req *q);
/* The organism's admin screens (ctl_admin_screens_on): on their origin
 * (Host organism.localhost, any port), the one origin that may frame the
 * page, the control plane's on the same port ("http://seed.localhost:8080");
 * on the control plane's own origin, the admin origin its page frames from
 * ("http://organism.localhost:8080"). *ret is NULL on any other host or in
 * a layout without admin screens. 0 or -ENOMEM; caller frees. */
int ctl_req_admin_framer(const struct ctl_req *q, char **ret);
int ctl_req_admin_origin(const struct ctl_req *q, char **ret);
/* A path outside /_seed on the control plane's own origin, where the
 * organism is never served: "/" goes to /_seed/, /favicon.ico is the
 * control plane's icon, the rest is 404. */
int ctl_control_host_other(struct ctl_req *q, struct ctl_resp *resp);
/* Adds Set-Cookie headers to out that expire the cookies under /_seed the
 * kernel did not set (page loads only; a bounded number per answer). */
int ctl_expire_foreign_cookies(const struct ctl_req *q, struct ctl_hdrs *out);

/* auth.c */
int ctl_link_consume(struct db *kdb, const char *token);
/* The client a request comes from (its address, or X-Forwarded-For behind
 * a trusted proxy; see limit.h). */
void ctl_req_client(const struct ctl_req *q, struct ctl_client *ret);
/* A new session: cookie value (secret) and public id. Caller frees both. */
int ctl_session_new(struct db *kdb, const char *user_agent, char **ret_cookie, char **ret_id);
/* The live session whose cookie is in the Cookie header(s): from cache if
 * the DB confirmed it lately (session-cache.h), else from the DB, which
 * renews it. -ENOENT when there is none. Caller frees both. */
int ctl_session_find(struct db *kdb, struct ctl_session_cache *cache, const struct ctl_hdrs *hdrs,
                     const char *cookie_name, char **ret_cookie, char **ret_id);
/* Revokes the session id in the DB, then drops it from cache: it stops
 * working at once. -ENOENT when there is no such live session. Logs nothing. */
int ctl_session_revoke(struct db *kdb, struct ctl_session_cache *cache, const char *id);

/* preview.c: the app's origin, as the control plane's host names it
 * ("seed.<name>" → "<name>", with the request's port). Caller frees. */
int ctl_app_origin(const struct ctl_req *q, char **ret);

/* static.c: the embedded UI */
int ctl_static_file(const char *name, struct ctl_resp *resp);
/* index.html with the Seed's name, the API token and the admin screens'
 * origin ("" when none) filled in. */
int ctl_static_index(const char *seed_name, const char *token, const char *admin_origin, struct ctl_resp *resp);

/* proxy.c (libmicrohttpd-facing); conn is a struct MHD_Connection *. */
void ctl_upstream_register(struct ctl *c, int fd);
void ctl_upstream_unregister(struct ctl *c, int fd);
void ctl_proxy_free(struct ctl_proxy *px);
/* Frees the loop's kept proxy states (ctl.px_spare); once the loop stopped. */
void ctl_proxy_spares_free(struct ctl *c);

/* The fast path's side of the proxy (fast.h), on the loop's thread. */
/* Starts proxying q (the slot taken, the head built; sent by
 * ctl_proxy_fast_step). on_ready is called when a wait ends. < 0: nothing
 * started (-EBUSY: the proxied pool is full); the daemon answers. */
int ctl_proxy_fast_start(struct ctl_req *q, void (*on_ready)(void *userdata), void *userdata,
                         struct ctl_proxy **ret);
/* Sends, then reads the answer's head: 0 once it is in, or known not to
 * come (kept in px either way), -EAGAIN while it waits. */
int ctl_proxy_fast_step(struct ctl_proxy *px);
/* 1 when the answer is one the fast path sends whole: its head (status
 * line, headers, "Connection: close" when close, Content-Length) appended to out, its body at *ret_body
 * (in px: valid until it is freed), the organism's connection released.
 * 0: the daemon sends it (a stream, a tag to put in, a HEAD, an error);
 * < 0 on no memory. */
int ctl_proxy_fast_answer(struct ctl_req *q, struct ctl_proxy *px, bool close, struct buf *out,
                          const char **ret_body, size_t *ret_len);
/* px (answered or not) waits for the daemon's request for method and
 * target on connection fd (freed on failure); ctl_proxy_begin takes it,
 * else the connection's end frees it (ctl_proxy_unpark). */
int ctl_proxy_park(struct ctl *c, int fd, struct ctl_proxy *px, const char *method, const char *target);
struct ctl_proxy *ctl_proxy_unpark(struct ctl *c, int fd);
