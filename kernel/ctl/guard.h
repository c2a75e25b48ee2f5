/* guard.h — the checks every request passes before a handler runs: the Host
 * allowlist (defeats DNS rebinding), Fetch Metadata for navigations, same-origin
 * and JSON rules for state-changing calls, and path/query parsing. Pure
 * functions: no I/O, no state. */
#pragma once

#include "base/base.h"

/* Whether a Host header value is allowed: localhost, 127.0.0.1, [::1],
 * *.localhost and the extra names (exact, or "*.example.com" for its
 * subdomains), each with or without ":port". NULL or empty is refused. */
bool ctl_host_allowed(const char *host, char *const *allowed_hosts);
/* Whether a Host header value names host name (case-insensitive, any or
 * no port). A malformed Host is no name. */
bool ctl_host_is(const char *host, const char *name);
/* Whether the Host is the organism's own origin (organism.localhost and its
 * subdomains), where /_seed is never served. */
bool ctl_host_is_organism(const char *host);

/* The organism's admin origin's host: admin screens the organism declares
 * (organism/extensions.h) are framed from it, never from the control
 * plane's origin, and it may be framed only by the control plane's. */
#define CTL_ADMIN_HOST "organism.localhost"
/* Whether admin screens are framed in this layout: the control plane has an
 * origin of its own on a localhost name (server.control_host, default
 * seed.localhost), which a browser reaches on the same port as
 * organism.localhost. NULL or "" (the same-origin fallback) or a name of
 * one's own (a hosted Seed, where organism.localhost would be the browser's
 * own machine): no. */
bool ctl_admin_screens_on(const char *control_host);
/* "http://" + name + the ":port" of host (a Host value ctl_host_allowed
 * accepted; none when it has none), e.g. ("organism.localhost",
 * "seed.localhost:8080") -> "http://organism.localhost:8080". -EINVAL for a
 * malformed host. Caller frees. */
int ctl_origin_on_port_of(const char *name, const char *host, char **ret);

enum ctl_nav {
        CTL_NAV_OK,       /* Sec-Fetch-Dest: document and Sec-Fetch-Mode: navigate */
        CTL_NAV_MISSING,  /* no Fetch Metadata at all: a browser too old to trust */
        CTL_NAV_REFUSED,  /* fetch/XHR, a frame, an image, … */
};
enum ctl_nav ctl_fetch_nav(const char *sec_fetch_dest, const char *sec_fetch_mode,
                           const char *sec_fetch_site);

/* State-changing calls must come from the same origin: Sec-Fetch-Site is
 * "same-origin" (it may be absent only for the CLI, which sends the bearer
 * token) and Origin, if present, equals "http://<host>". 0 or -EPERM. */
int ctl_check_same_origin(const char *sec_fetch_site, const char *origin, const char *host,
                          bool cli);
/* GET, HEAD and OPTIONS change nothing; everything else does. */
bool ctl_method_changes_state(const char *method);
/* "application/json", optionally with parameters ("; charset=utf-8"). */
bool ctl_content_type_is_json(const char *content_type);

enum ctl_path_kind {
        CTL_PATH_ORGANISM,
        CTL_PATH_SEED,
};
/* Classifies a raw request path (no query): /_seed and /_seed/… belong to
 * the control plane, everything else to the organism. A path that is not
 * origin-form, has bad or NUL percent-escapes, dot segments, or that only
 * decodes to /_seed (e.g. /%5Fseed/) is -EINVAL. */
int ctl_path_classify(const char *path);

/* Whether a raw request-target has only visible ASCII (no spaces, controls,
 * DEL or 8-bit bytes), so it can be forwarded as it came. */
bool ctl_target_is_clean(const char *target);

/* The percent-decoded value of key in a raw query string ('+' is a space).
 * -ENOENT if absent, -EINVAL if malformed. Caller frees. */
int ctl_query_get(const char *query, const char *key, char **ret);
/* Whether the query carries something named like an API token. */
bool ctl_query_has_token(const char *query);
