/* routes.c — everything under /_seed: the route table (data, not if-chains),
 * the guards each auth level implies, and the handlers. */
#include "ctl/server.h"
#include "ctl/badge.h"
#include "ctl/cookie.h"
#include "ask/image.h"
#include "ctl/guard.h"
#include "ctl/logo.h"
#include "ctl/pages.h"
#include "base/crypto.h"
#include "base/fileio.h"
#include "base/log.h"
#include "db/db.h"
#include "fsx/fsx.h"

#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>

enum ctl_auth {
        AUTH_UNSET,   /* the zero value: a route that names no level is refused, never open */
        AUTH_NONE,    /* anyone: health check, the notice pages' stylesheet, the favicon, and the
                       * preview's enter (its one-time ticket is the credential) and leave */
        AUTH_LINK,    /* a sign-in link: top-level navigations only */
        AUTH_FORM,    /* the password form's POST: a same-origin top-level navigation */
        AUTH_PAGE,    /* the page carrying the API token: session + top-level navigation */
        AUTH_SESSION, /* static assets and the logo: session */
        AUTH_BADGE,   /* the owner's presence cookie on the app's origin, badge on (badge.h) */
        AUTH_API,     /* session cookie + X-Seed-Token, or the CLI bearer token */
        AUTH_CLI,     /* the CLI bearer token only */
};

typedef int (*ctl_handler)(struct ctl_req *q, struct ctl_resp *resp);

/* Where a route answers, when the control plane has an origin of its own. */
enum ctl_where {
        ON_CONTROL,   /* its own origin only (the zero value) */
        ON_APP,       /* the app's origin only: the badge and point and ask */
};

struct ctl_route {
        const char *method;
        const char *pattern; /* "*" matches one non-empty path segment */
        enum ctl_auth auth;
        ctl_handler handler;
        enum ctl_where where;
        bool image_body;     /* a POST whose body is a picture (ask/image.h), not JSON */
};

#define CTL_FORM_MAX 4096 /* the sign-in form's body */

#define API_UNAUTHORIZED                                                                   \
        "not signed in: /_seed/api needs the session cookie and its X-Seed-Token header, " \
        "or the CLI token"

/* ---- helpers ---- */

static bool is_api_path(const char *path) {
        return startswith(path, "/_seed/api/") || streq(path, "/_seed/api");
}

static int page_resp(struct ctl_resp *resp, int status, int (*page)(char **ret)) {
        char *html = NULL;
        int r = page(&html);
        if (r < 0)
                return r;
        ctl_resp_take(resp, status, "text/html; charset=utf-8", html);
        return 0;
}

/* Whether the control plane has an origin of its own (server.control_host). */
static bool own_origin(const struct ctl *c) {
        return c->control_host != NULL;
}

/* The ":port" part of a Host value (already checked by ctl_host_allowed),
 * or "". */
static const char *host_port(const char *host) {
        const char *end = host && host[0] == '[' ? strchr(host, ']') : host;
        const char *colon = end ? strchr(end, ':') : NULL;
        return colon ? colon : "";
}

/* The control plane's origin as this request should be sent to it:
 * scheme ("http:", or "" for a scheme-relative Location) + "//" + the
 * control host + the port the request's Host names (or, for a localhost
 * control host reached without one, the port the kernel serves). In the
 * same-origin fallback: the request's own Host. Caller frees. */
static int control_origin(const struct ctl_req *q, const char *scheme, char **ret) {
        const struct ctl *c = q->ctl;
        const char *host = ctl_req_header(q, "Host");
        if (!own_origin(c))
                return xasprintf(ret, "%s//%s", scheme, host ? host : "localhost");
        const char *port = host_port(host);
        if (*port)
                return xasprintf(ret, "%s//%s%s", scheme, c->control_host, port);
        if (ctl_host_is(c->control_host, "localhost") || endswith(c->control_host, ".localhost"))
                return xasprintf(ret, "%s//%s:%u", scheme, c->control_host, c->port);
        return xasprintf(ret, "%s//%s", scheme, c->control_host);
}

bool ctl_req_on_control_host(const struct ctl_req *q) {
        return !own_origin(q->ctl) || ctl_host_is(ctl_req_header(q, "Host"), q->ctl->control_host);
}

/* name's origin on the port of the request's Host when the request is for
 * on_host and the layout frames admin screens; NULL otherwise (a Host that
 * passed the allowlist is never malformed, but one would frame nothing). */
static int admin_peer(const struct ctl_req *q, const char *on_host, const char *name, char **ret) {
        const char *host = ctl_req_header(q, "Host");
        char *origin = NULL;
        if (ctl_admin_screens_on(q->ctl->control_host) && ctl_host_is(host, on_host)) {
                int r = ctl_origin_on_port_of(name, host, &origin);
                if (r == -ENOMEM)
                        return r;
        }
        *ret = origin;
        return 0;
}

int ctl_req_admin_framer(const struct ctl_req *q, char **ret) {
        return admin_peer(q, CTL_ADMIN_HOST, q->ctl->control_host, ret);
}

int ctl_req_admin_origin(const struct ctl_req *q, char **ret) {
        return admin_peer(q, q->ctl->control_host, CTL_ADMIN_HOST, ret);
}

/* The private page, with the password form when password sign-in is on and
 * with_form (top-level navigations to the page only) and an alert message
 * (may be NULL). On the own origin the browser may save the password, and a
 * navigation from another site (which brought no SameSite=Strict cookie)
 * gets a link to reopen the page. A page with the form sends
 * Referrer-Policy: same-origin: under no-referrer, browsers send
 * "Origin: null" with the form's POST, and /_seed/login wants to see its own
 * origin there. */
static int sign_in_resp(struct ctl_req *q, struct ctl_resp *resp, int status, bool with_form,
                        const char *message) {
        char *html = NULL;
        const char *site = ctl_req_header(q, "Sec-Fetch-Site");
        bool form = with_form && q->ctl->owner.enabled;
        unsigned flags = (form ? CTL_SIGN_IN_FORM : 0) | (own_origin(q->ctl) ? CTL_SIGN_IN_SAVEABLE : 0) |
                         (own_origin(q->ctl) && site && (streq(site, "cross-site") || streq(site, "same-site"))
                                  ? CTL_SIGN_IN_REOPEN
                                  : 0);
        int r = ctl_page_sign_in(q->ctl->seed_name, flags, message, &html);
        if (r < 0)
                return r;
        ctl_resp_take(resp, status, "text/html; charset=utf-8", html);
        return form ? ctl_hdrs_add(&resp->hdrs, "Referrer-Policy", "same-origin") : 0;
}

static int private_resp(struct ctl_req *q, struct ctl_resp *resp, bool with_form) {
        return sign_in_resp(q, resp, 401, with_form, NULL);
}

static int json_take(struct ctl_resp *resp, int status, struct buf *b) {
        int r = buf_puts(b, "\n");
        if (r < 0)
                return r;
        ctl_resp_take(resp, status, "application/json", buf_steal(b));
        return 0;
}

static int set_session_cookie(struct ctl_req *q, struct ctl_resp *resp, const char *value,
                              long max_age) {
        _cleanup_free_ char *cookie = NULL;
        int r = ctl_cookie_header(q->ctl->cookie_name, value, max_age, own_origin(q->ctl), &cookie);
        if (r >= 0)
                r = ctl_hdrs_add(&resp->hdrs, "Set-Cookie", cookie);
        if (cookie)
                secure_zero(cookie, strlen(cookie));
        return r;
}

/* ---- handlers ---- */

static int h_healthz(struct ctl_req *q, struct ctl_resp *resp) {
        return ctl_resp_set(resp, 200, "application/json", "{\"ok\":true}\n");
}

static int h_redirect_slash(struct ctl_req *q, struct ctl_resp *resp) {
        int r = ctl_resp_set(resp, 308, "text/plain; charset=utf-8", "See /_seed/\n");
        return r < 0 ? r : ctl_hdrs_add(&resp->hdrs, "Location", "/_seed/");
}

static int h_asset(struct ctl_req *q, struct ctl_resp *resp) {
        const char *name = strrchr(q->path, '/') + 1;
        int r = ctl_static_file(name, resp);
        if (r == -ENOENT)
                return page_resp(resp, 404, ctl_page_not_found);
        return r;
}

/* Logs a refused logo unless that refusal was the last one logged;
 * refused == 0 (a logo served, or none) re-arms it. */
static void logo_log(struct ctl *c, size_t i, int refused) {
        int key = refused ? (int)(i + 1) << 16 | -refused : 0;
        pthread_mutex_lock(&c->lock);
        bool log = key != 0 && key != c->logo_logged;
        c->logo_logged = key;
        pthread_mutex_unlock(&c->lock);
        if (log)
                log_warn("the logo %s %s: not served (GET /_seed/logo answers 404)", ctl_logo_paths[i],
                         ctl_logo_refusal(refused));
}

static bool etag_matches(const char *if_none_match, const char *etag) {
        return if_none_match && (streq(if_none_match, "*") || strstr(if_none_match, etag));
}

/* GET /_seed/logo: the first of the logo candidates that exists (see
 * logo.h), sandboxed; 404 when there is none or it is refused. */
static int h_logo(struct ctl_req *q, struct ctl_resp *resp) {
        struct ctl *c = q->ctl;
        _cleanup_close_ int root = -1;
        struct ctl_logo logo = {0};
        size_t i = 0;
        int r = -ENOENT;
        if (c->seed_dir && (r = fsx_open_root(c->seed_dir, &root)) < 0)
                return log_error_errno(r, "cannot open the Seed folder for its logo: %m");
        for (i = 0; root >= 0 && i < CTL_LOGO_CANDIDATES; i++)
                if ((r = ctl_logo_read(root, i, &logo)) != -ENOENT)
                        break;
        if (r == -ENOMEM)
                return r;
        logo_log(c, i, r == -ENOENT ? 0 : r);
        if (r < 0)
                return page_resp(resp, 404, ctl_page_not_found);
        bool fresh = etag_matches(ctl_req_header(q, "If-None-Match"), logo.etag);
        if (fresh) {
                ctl_resp_take(resp, 304, NULL, NULL);
        } else {
                ctl_resp_take(resp, 200, logo.ctype, TAKE_PTR(logo.data));
                resp->len = logo.len;
        }
        static const char *const hs[][2] = {
                {"Content-Security-Policy", CTL_LOGO_CSP},
                {"Content-Disposition", "inline"},
                {"Cache-Control", "no-cache"},
        };
        for (size_t k = 0; r >= 0 && k < ARRAY_SIZE(hs); k++)
                r = ctl_hdrs_add(&resp->hdrs, hs[k][0], hs[k][1]);
        if (r >= 0)
                r = ctl_hdrs_add(&resp->hdrs, "ETag", logo.etag);
        ctl_logo_done(&logo);
        return r;
}

/* GET /_seed/badge/logo: the logo on the app's origin, for the badge of the
 * owner's browser (the control plane's logo route is on its own origin). */
static int h_badge_logo(struct ctl_req *q, struct ctl_resp *resp) {
        return h_logo(q, resp);
}

/* Logs when a failure put a client, or everyone, over the limit (a
 * limited client's further bad links say so again: at a bounded rate). */
static void log_limit(enum ctl_limit lim, const char *who) {
        if (lim == CTL_LIMIT_CLIENT)
                log_limited(LOG_WARN, who,
                            "client %s made %d failed sign-ins within 15 minutes: no password from it is "
                            "checked until that many are older than 15 minutes",
                            who, CTL_FAIL_PER_CLIENT);
        else if (lim == CTL_LIMIT_OVERALL)
                log_limited(LOG_WARN, "",
                            "%d failed sign-ins within 15 minutes: no password is checked for now "
                            "(sign-in links and signed-in browsers still work)",
                            CTL_FAIL_OVERALL);
}

/* A new session for this browser: the cookie, and on to /_seed/ — by a
 * 303 after the form's same-origin POST, by the "Signed in" page after a
 * link (see ctl_page_signed_in). */
static int signed_in_resp(struct ctl_req *q, struct ctl_resp *resp, const char *how, const char *who,
                          bool redirect) {
        _cleanup_free_ char *cookie = NULL, *id = NULL;
        int r = ctl_session_new(q->ctl->kdb, ctl_req_header(q, "User-Agent"), &cookie, &id);
        if (r < 0)
                return r;
        log_info("signed in a browser with %s (session %s, client %s)", how, id, who);
        if (redirect) {
                r = ctl_resp_set(resp, 303, "text/plain; charset=utf-8", "Signed in. See /_seed/\n");
                if (r >= 0)
                        r = ctl_hdrs_add(&resp->hdrs, "Location", "/_seed/");
        } else
                r = page_resp(resp, 200, ctl_page_signed_in);
        if (r >= 0)
                r = set_session_cookie(q, resp, cookie, CTL_SESSION_MAX_AGE_S);
        secure_zero(cookie, strlen(cookie));
        return r;
}

/* Links are checked even while the client or everyone is limited: a link
 * is 256 random bits, so checking one gives an attacker nothing, and it is
 * how the owner gets back in. A bad one counts as a failed sign-in. */
static int h_login(struct ctl_req *q, struct ctl_resp *resp) {
        _cleanup_free_ char *token = NULL;
        struct ctl_client client;
        char who[CTL_CLIENT_STRLEN];
        ctl_req_client(q, &client);
        ctl_client_str(&client, who);
        int r = ctl_query_get(q->query, "t", &token);
        if (r == -ENOMEM)
                return r;
        bool given = r >= 0;
        r = given ? ctl_link_consume(q->ctl->kdb, token) : -ENOENT;
        if (token)
                secure_zero(token, strlen(token));
        if (r == -ENOENT) {
                log_limited(LOG_INFO, who, "refused a sign-in link that is used, expired or unknown (client %s)", who);
                if (given) /* nothing was tried without one */
                        log_limit(ctl_limiter_fail(q->ctl->limiter, &client, now_ms()), who);
                return page_resp(resp, 403, ctl_page_link_invalid);
        }
        if (r < 0)
                return r;
        return signed_in_resp(q, resp, "a one-time link", who, false);
}

/* The form's two fields from the body; -EINVAL if either is missing. */
static int form_fields(struct ctl_req *q, char **ret_user, char **ret_password) {
        _cleanup_free_ char *user = NULL;
        char *password = NULL;
        const char *body = q->body.data ? q->body.data : "";
        if (q->body.len > CTL_FORM_MAX || strlen(body) != q->body.len)
                return -EINVAL;
        int r = ctl_query_get(body, "user", &user);
        if (r >= 0)
                r = ctl_query_get(body, "password", &password);
        if (r < 0)
                return r == -ENOMEM ? r : -EINVAL;
        *ret_user = TAKE_PTR(user);
        *ret_password = password;
        return 0;
}

static void free_secret(char *s) {
        if (s)
                secure_zero(s, strlen(s));
        free(s);
}

static int limited_resp(struct ctl_resp *resp, bool overall) {
        char *html = NULL;
        int r = ctl_page_limited(overall, &html);
        if (r < 0)
                return r;
        ctl_resp_take(resp, 429, "text/html; charset=utf-8", html);
        return 0;
}

/* POST /_seed/login: the password form. A limited client (or everyone,
 * past the overall limit) gets the same answer whatever it sent: nothing is
 * checked. */
static int h_login_password(struct ctl_req *q, struct ctl_resp *resp) {
        struct ctl *c = q->ctl;
        struct ctl_client client;
        char who[CTL_CLIENT_STRLEN];
        char *user = NULL, *password = NULL;

        if (!c->owner.enabled)
                return page_resp(resp, 403, ctl_page_password_off);
        ctl_req_client(q, &client);
        ctl_client_str(&client, who);
        enum ctl_limit lim = ctl_limiter_begin(c->limiter, &client, now_ms());
        if (lim != CTL_LIMIT_NONE) {
                if (q->body.data)
                        secure_zero(q->body.data, q->body.len);
                log_limited(LOG_DEBUG, who, "refused a password sign-in unchecked: %s is limited (client %s)",
                            lim == CTL_LIMIT_OVERALL ? "everyone" : "this client", who);
                return limited_resp(resp, lim == CTL_LIMIT_OVERALL);
        }
        int r = form_fields(q, &user, &password);
        if (q->body.data)
                secure_zero(q->body.data, q->body.len);
        if (r < 0) {
                (void)ctl_limiter_end(c->limiter, &client, false, now_ms());
                return r == -EINVAL ? page_resp(resp, 400, ctl_page_bad_form) : r;
        }
        bool ok = ctl_owner_check(&c->owner, user, password);
        free_secret(user);
        free_secret(password);
        lim = ctl_limiter_end(c->limiter, &client, !ok, now_ms());
        if (!ok) {
                log_limited(LOG_INFO, who, "refused a password sign-in: wrong username or password (client %s)", who);
                log_limit(lim, who);
                return sign_in_resp(q, resp, 401, true, "Wrong username or password.");
        }
        return signed_in_resp(q, resp, "the owner password", who, true);
}

/* The page, with the API token and, where admin screens are framed, their
 * origin: in a <meta> for app.js and as the only frame-src of its CSP. */
static int h_page(struct ctl_req *q, struct ctl_resp *resp) {
        char token[SHA256_HEX_LEN + 1];
        _cleanup_free_ char *admin = NULL, *csp = NULL;
        int r = ctl_req_admin_origin(q, &admin);
        if (r >= 0 && admin && (r = ctl_csp_with_admin_frames(admin, &csp)) >= 0)
                r = ctl_hdrs_add(&resp->hdrs, "Content-Security-Policy", csp);
        if (r < 0)
                return r;
        ctl_api_token(q->ctl->session_key, q->cookie_value, token);
        r = ctl_static_index(q->ctl->seed_name, token, admin ? admin : "", resp);
        secure_zero(token, sizeof token);
        if (r >= 0) /* renew the browser's copy too: 30 days from last use */
                r = set_session_cookie(q, resp, q->cookie_value, CTL_SESSION_MAX_AGE_S);
        return r;
}

static int h_status(struct ctl_req *q, struct ctl_resp *resp) {
        struct ctl *c = q->ctl;
        char *json = NULL;
        if (c->status) {
                int r = c->status(c->userdata, &json);
                if (r < 0)
                        return log_error_errno(r, "status callback failed: %m");
                ctl_resp_take(resp, 200, "application/json", json);
                return 0;
        }
        _cleanup_buf_ struct buf b = BUF_INIT(64 * 1024);
        int r = buf_puts(&b, "{\"name\":");
        if (r >= 0)
                r = ctl_json_string(&b, c->seed_name);
        if (r >= 0)
                r = buf_puts(&b, "}");
        return r < 0 ? r : json_take(resp, 200, &b);
}

#define LOG_TAIL_MAX (2 * 1024 * 1024)
#define LOG_LINES_MAX 2000

/* The last n lines of a log file as a JSON array into b. */
static int log_tail_json(const char *path, long n, struct buf *b) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return errno == ENOENT ? buf_puts(b, "[]") : -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        off_t off = st.st_size > LOG_TAIL_MAX ? st.st_size - LOG_TAIL_MAX : 0;
        size_t want = (size_t)(st.st_size - off);
        _cleanup_free_ char *data = malloc(want + 1);
        if (!data)
                return -ENOMEM;
        ssize_t got = pread(fd, data, want, off);
        if (got < 0)
                return -errno;
        size_t len = (size_t)got;
        const char *start = data, *end = data + len;
        if (off > 0) { /* drop the partial first line */
                const char *nl = memchr(data, '\n', len);
                start = nl ? nl + 1 : end;
        }
        if (end > start && end[-1] == '\n')
                end--;
        long total = start < end ? 1 : 0;
        for (const char *p = start; p < end; p++)
                total += *p == '\n';
        long skip = total > n ? total - n : 0;
        const char *p = start;
        for (; skip > 0; skip--)
                p = (const char *)memchr(p, '\n', (size_t)(end - p)) + 1;
        int r = buf_puts(b, "[");
        for (bool first = true; r >= 0 && p < end; first = false) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
                if (!first)
                        r = buf_puts(b, ",");
                if (r >= 0)
                        r = ctl_json_string_n(b, p, ll);
                p += ll + 1;
        }
        return r < 0 ? r : buf_puts(b, "]");
}

static int h_logs(struct ctl_req *q, struct ctl_resp *resp) {
        _cleanup_free_ char *name = NULL, *lines = NULL, *file = NULL, *path = NULL;
        long n = 200;
        int r = ctl_query_get(q->query, "name", &name);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || !(streq(name, "kernel") || streq(name, "organism")))
                return ctl_resp_error(resp, 400, "name must be kernel or organism");
        r = ctl_query_get(q->query, "lines", &lines);
        if (r == -ENOMEM)
                return r;
        if (r >= 0) {
                char *end = NULL;
                errno = 0;
                n = strtol(lines, &end, 10);
                if (errno || !end || *end || end == lines || n < 1 || n > LOG_LINES_MAX)
                        return ctl_resp_error(resp, 400, "lines must be 1 to 2000");
        }
        if (xasprintf(&file, ".seed/logs/%s.log", name) < 0 ||
            !(path = path_join(strempty(q->ctl->seed_dir) ? "." : q->ctl->seed_dir, file)))
                return -ENOMEM;
        _cleanup_buf_ struct buf b = BUF_INIT(16 * 1024 * 1024);
        r = buf_puts(&b, "{\"name\":");
        if (r >= 0)
                r = ctl_json_string(&b, name);
        if (r >= 0)
                r = buf_puts(&b, ",\"lines\":");
        if (r >= 0)
                r = log_tail_json(path, n, &b);
        if (r >= 0)
                r = buf_puts(&b, "}");
        if (r < 0)
                return log_error_errno(r, "could not read %s: %m", file);
        return json_take(resp, 200, &b);
}

static int h_login_links(struct ctl_req *q, struct ctl_resp *resp) {
        _cleanup_free_ char *token = NULL;
        int r = ctl_login_link_new(q->ctl->kdb, &token);
        if (r == -EMFILE)
                return ctl_resp_error(resp, 429,
                                      "too many live sign-in links (at most 20): use one or wait "
                                      "until they expire (15 minutes)");
        if (r < 0)
                return r;
        _cleanup_buf_ struct buf b = BUF_INIT(4096);
        _cleanup_free_ char *url = NULL, *origin = NULL;
        if (control_origin(q, "http:", &origin) < 0 ||
            xasprintf(&url, "%s/_seed/login?t=%s", origin, token) < 0) {
                secure_zero(token, strlen(token));
                return -ENOMEM;
        }
        r = buf_puts(&b, "{\"url\":");
        if (r >= 0)
                r = ctl_json_string(&b, url);
        if (r >= 0)
                r = buf_puts(&b, ",\"expires_in\":900}");
        secure_zero(token, strlen(token));
        secure_zero(url, strlen(url));
        return r < 0 ? r : json_take(resp, 201, &b);
}

static int h_sessions(struct ctl_req *q, struct ctl_resp *resp) {
        struct db_session *s = NULL;
        size_t n = 0;
        int r = db_session_list(q->ctl->kdb, wall_ms(), &s, &n);
        if (r < 0)
                return log_error_errno(r, "could not list sessions: %m");
        _cleanup_buf_ struct buf b = BUF_INIT(4 * 1024 * 1024);
        r = buf_puts(&b, "{\"sessions\":[");
        for (size_t i = 0; i < n && r >= 0; i++) {
                r = buf_printf(&b, "%s{\"id\":", i ? "," : "");
                if (r >= 0)
                        r = ctl_json_string(&b, s[i].id);
                if (r >= 0)
                        r = buf_printf(&b,
                                       ",\"created_at\":%lld,\"last_used_at\":%lld,"
                                       "\"expires_at\":%lld,\"current\":%s,\"user_agent\":",
                                       (long long)s[i].created_at, (long long)s[i].last_used_at,
                                       (long long)s[i].expires_at,
                                       q->session_id && streq(q->session_id, s[i].id) ? "true"
                                                                                       : "false");
                if (r >= 0)
                        r = ctl_json_string(&b, s[i].user_agent);
                if (r >= 0)
                        r = buf_puts(&b, "}");
        }
        for (size_t i = 0; i < n; i++)
                db_session_done(&s[i]);
        free(s);
        if (r >= 0)
                r = buf_puts(&b, "]}");
        return r < 0 ? r : json_take(resp, 200, &b);
}

static int h_session_revoke(struct ctl_req *q, struct ctl_resp *resp) {
        if (!q->param || !ctl_is_hex(q->param, strlen(q->param)) || strlen(q->param) > 64)
                return ctl_resp_error(resp, 400, "bad session id");
        int r = ctl_session_revoke(q->ctl->kdb, &q->ctl->sessions, q->param);
        if (r == -ENOENT)
                return ctl_resp_error(resp, 404, "no such session");
        if (r < 0)
                return log_error_errno(r, "could not revoke a session: %m");
        log_info("revoked session %s", q->param);
        ctl_preview_forget_session(q->ctl, q->param);
        ctl_badge_forget_session(q->ctl, q->param);
        r = ctl_resp_set(resp, 200, "application/json", "{\"ok\":true}\n");
        if (r >= 0 && q->session_id && streq(q->session_id, q->param))
                r = set_session_cookie(q, resp, "", 0);
        return r;
}

static int h_logout(struct ctl_req *q, struct ctl_resp *resp) {
        if (!q->session_id)
                return ctl_resp_error(resp, 400, "no browser session to sign out");
        int r = ctl_session_revoke(q->ctl->kdb, &q->ctl->sessions, q->session_id);
        if (r < 0 && r != -ENOENT)
                return log_error_errno(r, "could not sign out: %m");
        log_info("signed out session %s", q->session_id);
        ctl_preview_forget_session(q->ctl, q->session_id);
        ctl_badge_forget_session(q->ctl, q->session_id);
        r = ctl_resp_set(resp, 200, "application/json", "{\"ok\":true}\n");
        return r < 0 ? r : set_session_cookie(q, resp, "", 0);
}

static const struct ctl_route routes[] = {
        {"GET", "/_seed/healthz", AUTH_NONE, h_healthz, ON_CONTROL, false},
        {"GET", "/_seed", AUTH_NONE, h_redirect_slash, ON_CONTROL, false},
        {"GET", "/_seed/public.css", AUTH_NONE, h_asset, ON_CONTROL, false},
        {"GET", "/_seed/favicon.svg", AUTH_NONE, h_asset, ON_CONTROL, false},
        {"GET", "/_seed/reopen.js", AUTH_NONE, h_asset, ON_CONTROL, false},
        {"GET", "/_seed/login", AUTH_LINK, h_login, ON_CONTROL, false},
        {"POST", "/_seed/login", AUTH_FORM, h_login_password, ON_CONTROL, false},
        {"GET", "/_seed/", AUTH_PAGE, h_page, ON_CONTROL, false},
        {"GET", "/_seed/app.js", AUTH_SESSION, h_asset, ON_CONTROL, false},
        {"GET", "/_seed/style.css", AUTH_SESSION, h_asset, ON_CONTROL, false},
        {"GET", "/_seed/logo", AUTH_SESSION, h_logo, ON_CONTROL, false},
        {"GET", "/_seed/api/status", AUTH_API, h_status, ON_CONTROL, false},
        {"GET", "/_seed/api/logs", AUTH_API, h_logs, ON_CONTROL, false},
        {"POST", "/_seed/api/login-links", AUTH_CLI, h_login_links, ON_CONTROL, false},
        {"GET", "/_seed/api/owner/sessions", AUTH_API, h_sessions, ON_CONTROL, false},
        {"POST", "/_seed/api/owner/sessions/*/revoke", AUTH_API, h_session_revoke, ON_CONTROL, false},
        {"POST", "/_seed/api/owner/logout", AUTH_API, h_logout, ON_CONTROL, false},
        {"POST", "/_seed/api/preview/ticket", AUTH_API, ctl_preview_h_ticket, ON_CONTROL, false},
        {"GET", "/_seed/preview/enter", AUTH_NONE, ctl_preview_h_enter, ON_CONTROL, false},
        {"GET", "/_seed/preview/leave", AUTH_NONE, ctl_preview_h_leave, ON_CONTROL, false},
        {"GET", "/_seed/preview/state", AUTH_NONE, ctl_preview_h_state, ON_APP, false},
        {"GET", "/_seed/preview/bar.js", AUTH_NONE, ctl_preview_h_bar, ON_APP, false},
        {"GET", "/_seed/api/badge", AUTH_API, ctl_badge_h_settings, ON_CONTROL, false},
        {"POST", "/_seed/api/badge", AUTH_API, ctl_badge_h_settings_set, ON_CONTROL, false},
        {"POST", "/_seed/api/badge/ticket", AUTH_API, ctl_badge_h_ticket, ON_CONTROL, false},
        {"GET", "/_seed/api/ask-drafts/*", AUTH_API, ctl_badge_h_draft_get, ON_CONTROL, false},
        {"GET", "/_seed/badge", AUTH_NONE, ctl_badge_h_answer, ON_APP, false},
        {"GET", "/_seed/badge.js", AUTH_NONE, ctl_badge_h_script, ON_APP, false},
        {"GET", "/_seed/badge/enter", AUTH_NONE, ctl_badge_h_enter, ON_APP, false},
        {"GET", "/_seed/badge/logo", AUTH_BADGE, h_badge_logo, ON_APP, false},
        {"GET", "/_seed/badge/modern-screenshot.js", AUTH_BADGE, ctl_badge_h_script, ON_APP, false},
        {"POST", "/_seed/ask-draft", AUTH_BADGE, ctl_badge_h_draft_put, ON_APP, true},
};

/* Matches path against a pattern; a "*" segment is captured into *ret_param. */
static bool route_match(const char *pattern, const char *path, char **ret_param) {
        const char *star = strchr(pattern, '*');
        if (!star)
                return streq(pattern, path);
        size_t pre = (size_t)(star - pattern);
        if (strncmp(pattern, path, pre) != 0)
                return false;
        const char *seg = path + pre;
        size_t sl = strcspn(seg, "/");
        if (sl == 0 || !streq(star + 1, seg + sl))
                return false;
        *ret_param = strndup(seg, sl);
        return true;
}

/* ---- guards ---- */

static int nav_guard(struct ctl_req *q, struct ctl_resp *resp) {
        switch (ctl_fetch_nav(ctl_req_header(q, "Sec-Fetch-Dest"), ctl_req_header(q, "Sec-Fetch-Mode"),
                              ctl_req_header(q, "Sec-Fetch-Site"))) {
        case CTL_NAV_OK:
                return 0;
        case CTL_NAV_MISSING:
                return page_resp(resp, 400, ctl_page_too_old) < 0 ? -ENOMEM : 1;
        default:
                return page_resp(resp, 403, ctl_page_not_navigation) < 0 ? -ENOMEM : 1;
        }
}

static int load_session(struct ctl_req *q) {
        if (q->session_id)
                return 0;
        return ctl_session_find(q->ctl->kdb, &q->ctl->sessions, &q->hdrs, q->ctl->cookie_name,
                                &q->cookie_value, &q->session_id);
}

/* 0 if the request may use the API; 1 with *resp filled if not. Only an
 * Authorization in the Bearer scheme is the CLI's: any other (e.g. Basic
 * credentials a browser cached for a page of the organism and now adds to
 * every request to this origin) is ignored, and session auth decides. */
static int api_guard(struct ctl_req *q, bool cli_only, struct ctl_resp *resp) {
        const char *tok = NULL;
        size_t n = 0;
        int b = ctl_auth_bearer(ctl_req_header(q, "Authorization"), &tok, &n);
        if (b != -ENOENT) {
                if (b >= 0 && !strempty(q->ctl->cli_token) && ctl_hdrs_count(&q->hdrs, "Authorization") == 1 &&
                    ctl_token_eq(tok, n, q->ctl->cli_token)) {
                        q->via_cli = true;
                        return 0;
                }
                log_limited(LOG_INFO, q->client_ip, "refused an API call with a wrong bearer token (client %s)",
                            q->client_ip);
                return ctl_resp_error(resp, 401, "wrong CLI token") < 0 ? -ENOMEM : 1;
        }
        if (cli_only)
                return ctl_resp_error(resp, 401, "this call needs the CLI token") < 0 ? -ENOMEM : 1;
        int r = load_session(q);
        if (r == -ENOENT)
                return ctl_resp_error(resp, 401, API_UNAUTHORIZED) < 0 ? -ENOMEM : 1;
        if (r < 0)
                return r;
        const char *sent = ctl_req_header(q, "X-Seed-Token");
        char want[SHA256_HEX_LEN + 1];
        ctl_api_token(q->ctl->session_key, q->cookie_value, want);
        /* Constant time in the content, like the CLI token's (only a wrong
         * length shows, and every token has the same). */
        bool ok = sent && ctl_hdrs_count(&q->hdrs, "X-Seed-Token") == 1 && ctl_token_eq(sent, strlen(sent), want);
        secure_zero(want, sizeof want);
        if (!ok)
                return ctl_resp_error(resp, 401, "missing or wrong X-Seed-Token header") < 0 ? -ENOMEM : 1;
        return 0;
}

/* A prefetch or prerender (speculation rules, <link rel=prefetch>): the
 * browser's guess, not the owner's click. Sign-in routes answer it 503 and
 * look at nothing, so a page cannot make bad links count as failures, nor
 * spend a good one before the owner opens it. */
static bool is_speculative(const struct ctl_req *q) {
        return ctl_req_header(q, "Sec-Purpose") || ctl_req_header(q, "Purpose");
}

static int speculative_resp(struct ctl_resp *resp) {
        int r = ctl_resp_set(resp, 503, "text/plain; charset=utf-8",
                             "Sign-in links and forms are not prefetched or prerendered.\n");
        if (r >= 0)
                r = ctl_hdrs_add(&resp->hdrs, "Cache-Control", "no-store");
        return r < 0 ? -ENOMEM : 1;
}

/* Runs the auth level's checks: 0 = go on, 1 = *resp holds the refusal. */
static int auth_guard(struct ctl_req *q, enum ctl_auth auth, struct ctl_resp *resp) {
        int r;
        switch (auth) {
        case AUTH_UNSET:
                return log_error_errno(-EPERM, "route %s %s names no auth level: refused", q->method, q->path);
        case AUTH_NONE:
                return 0;
        case AUTH_LINK:
        case AUTH_FORM:
                return is_speculative(q) ? speculative_resp(resp) : nav_guard(q, resp);
        case AUTH_PAGE:
        case AUTH_SESSION:
                if (auth == AUTH_PAGE && (r = nav_guard(q, resp)) != 0)
                        return r;
                r = load_session(q);
                if (r == -ENOENT)
                        return private_resp(q, resp, auth == AUTH_PAGE) < 0 ? -ENOMEM : 1;
                return r < 0 ? r : 0;
        case AUTH_BADGE:
                if (ctl_badge_present(q->ctl, q))
                        return 0;
                return ctl_resp_error(resp, 403, "only the owner's browser, with the badge on") < 0 ? -ENOMEM : 1;
        case AUTH_API:
        case AUTH_CLI:
                return api_guard(q, auth == AUTH_CLI, resp);
        }
        return -EINVAL;
}

/* Same-origin, JSON and size rules of state-changing calls. */
static int write_guard(struct ctl_req *q, struct ctl_resp *resp) {
        if (ctl_check_same_origin(ctl_req_header(q, "Sec-Fetch-Site"), ctl_req_header(q, "Origin"),
                                  ctl_req_header(q, "Host"), q->via_cli) < 0) {
                log_limited(LOG_INFO, q->client_ip, "refused a cross-origin %s %s (client %s)", q->method, q->path,
                            q->client_ip);
                return ctl_resp_error(resp, 403, "state-changing calls must come from the same origin") < 0
                               ? -ENOMEM
                               : 1;
        }
        if (!ctl_content_type_is_json(ctl_req_header(q, "Content-Type")))
                return ctl_resp_error(resp, 415, "state-changing calls must send application/json") < 0
                               ? -ENOMEM
                               : 1;
        const char *cl = ctl_req_header(q, "Content-Length");
        if (cl && (strlen(cl) > 12 || strtoull(cl, NULL, 10) > CTL_MAX_BODY))
                return ctl_resp_error(resp, 413, "request body too large (at most 1 MiB)") < 0 ? -ENOMEM : 1;
        return 0;
}

/* POST /_seed/ask-draft: a picture, same-origin, at most ASK_IMAGE_MAX
 * bytes; its bytes decide what it is (ask/image.h), but it must say it is
 * a PNG or a JPEG. */
static int image_guard(struct ctl_req *q, struct ctl_resp *resp) {
        if (ctl_check_same_origin(ctl_req_header(q, "Sec-Fetch-Site"), ctl_req_header(q, "Origin"),
                                  ctl_req_header(q, "Host"), false) < 0) {
                log_limited(LOG_INFO, q->client_ip, "refused a cross-origin %s %s (client %s)", q->method, q->path,
                            q->client_ip);
                return ctl_resp_error(resp, 403, "a draft must come from the same origin") < 0 ? -ENOMEM : 1;
        }
        const char *ct = ctl_req_header(q, "Content-Type");
        if (!ct || !(ctl_strcaseeq(ct, "image/png") || ctl_strcaseeq(ct, "image/jpeg")))
                return ctl_resp_error(resp, 415, "a draft is an image/png or image/jpeg body") < 0 ? -ENOMEM : 1;
        const char *cl = ctl_req_header(q, "Content-Length");
        if (cl && (strlen(cl) > 12 || strtoull(cl, NULL, 10) > ASK_IMAGE_MAX))
                return ctl_resp_error(resp, 413, "the picture is larger than 3 MB") < 0 ? -ENOMEM : 1;
        q->body = BUF_INIT(ASK_IMAGE_MAX); /* nothing read yet */
        return 0;
}

/* The sign-in form's POST, the one form-encoded state change: a same-origin
 * navigation (checked by auth_guard and here), small. */
static int form_guard(struct ctl_req *q, struct ctl_resp *resp) {
        if (ctl_check_same_origin(ctl_req_header(q, "Sec-Fetch-Site"), ctl_req_header(q, "Origin"),
                                  ctl_req_header(q, "Host"), false) < 0) {
                log_limited(LOG_INFO, q->client_ip, "refused a cross-origin sign-in form (client %s)", q->client_ip);
                return page_resp(resp, 403, ctl_page_cross_origin) < 0 ? -ENOMEM : 1;
        }
        const char *ct = ctl_req_header(q, "Content-Type");
        static const char form[] = "application/x-www-form-urlencoded";
        if (!ct || strncasecmp(ct, form, strlen(form)) != 0 ||
            (ct[strlen(form)] && ct[strlen(form)] != ';' && ct[strlen(form)] != ' '))
                return page_resp(resp, 415, ctl_page_bad_form) < 0 ? -ENOMEM : 1;
        const char *cl = ctl_req_header(q, "Content-Length");
        if (cl && (strlen(cl) > 12 || strtoull(cl, NULL, 10) > CTL_FORM_MAX))
                return page_resp(resp, 413, ctl_page_bad_form) < 0 ? -ENOMEM : 1;
        return 0;
}

/* A /_seed request on a host other than the control plane's own (own
 * origin only): GET and HEAD outside the API are sent there (a 308 keeps
 * the path and query, so a sign-in link still works), everything else is
 * refused. */
static int elsewhere_resp(struct ctl_req *q, bool api, struct ctl_resp *resp) {
        _cleanup_free_ char *origin = NULL, *text = NULL;
        int r;
        if (!api && (streq(q->method, "GET") || streq(q->method, "HEAD"))) {
                if (control_origin(q, "", &origin) < 0 ||
                    xasprintf(&text, "%s%s%s%s", origin, q->path, q->query ? "?" : "", strempty(q->query) ? "" : q->query) < 0)
                        return -ENOMEM;
                r = ctl_resp_set(resp, 308, "text/plain; charset=utf-8",
                                 "The control plane has an address of its own.\n");
                return r < 0 ? r : ctl_hdrs_add(&resp->hdrs, "Location", text);
        }
        if (control_origin(q, "http:", &origin) < 0 ||
            xasprintf(&text, "the control plane is at %s/_seed/, not on the app's origin", origin) < 0)
                return -ENOMEM;
        if (api)
                return ctl_resp_error(resp, 421, text);
        return ctl_resp_set(resp, 421, "text/plain; charset=utf-8", text);
}

#define FOREIGN_COOKIES_MAX 16 /* expired per answer; more go with the next page */

/* Cookies under /_seed that the kernel did not set are expired whenever a
 * page is loaded (the organism's script can set any path on a shared
 * origin, and a cookie bomb there would make /_seed answer 431 or push the
 * session cookie out). On the control plane's own origin nothing else
 * lives, so "/" is cleared too; on the app's origin "/" is the organism's,
 * and so are its cookies there (and the owner's preview cookie). Only
 * top-level navigations: API calls stay small. */
int ctl_expire_foreign_cookies(const struct ctl_req *q, struct ctl_hdrs *out) {
        static const char *const fallback_paths[] = {"/_seed", "/_seed/", NULL};
        static const char *const own_paths[] = {"/", "/_seed", "/_seed/", NULL};
        const char *dest = ctl_req_header(q, "Sec-Fetch-Dest");
        if (!dest || !streq(dest, "document"))
                return 0;
        const char *const *paths = own_origin(q->ctl) && ctl_req_on_control_host(q) ? own_paths : fallback_paths;
        size_t left = FOREIGN_COOKIES_MAX;
        for (size_t i = 0; i < q->hdrs.n && left > 0; i++) {
                if (strcasecmp(q->hdrs.v[i].name, "Cookie") != 0)
                        continue;
                _cleanup_strv_free_ char **names = NULL;
                int r = ctl_cookie_foreign(q->hdrs.v[i].value, q->ctl->cookie_name, left, &names);
                if (r < 0)
                        return r;
                for (char **n = names; *n; n++, left--)
                        for (const char *const *p = paths; *p; p++) {
                                _cleanup_free_ char *h = NULL;
                                if (xasprintf(&h, "%s=; Path=%s; Max-Age=0", *n, *p) < 0 ||
                                    ctl_hdrs_add(out, "Set-Cookie", h) < 0)
                                        return -ENOMEM;
                        }
        }
        return 0;
}

int ctl_control_host_other(struct ctl_req *q, struct ctl_resp *resp) {
        bool get = streq(q->method, "GET") || streq(q->method, "HEAD");
        if (streq(q->path, "/") && get) {
                int r = ctl_resp_set(resp, 308, "text/plain; charset=utf-8", "See /_seed/\n");
                return r < 0 ? r : ctl_hdrs_add(&resp->hdrs, "Location", "/_seed/");
        }
        /* What a browser asks for when a page names no icon: the control plane's. */
        if (streq(q->path, "/favicon.ico") && get)
                return ctl_static_file("favicon.svg", resp);
        return ctl_resp_set(resp, 404, "text/plain; charset=utf-8",
                            "This is the Seed's control plane: the app it grows is not served on this "
                            "origin. Open it at its own address (e.g. http://localhost with this port).\n");
}

static int not_found(struct ctl_req *q, bool api, struct ctl_resp *resp) {
        if (api)
                return ctl_resp_error(resp, 404, "no such API call");
        return page_resp(resp, 404, ctl_page_not_found);
}

/* Calls a route that another module added (ctl_config.api_routes). */
static int call_api_route(struct ctl_req *q, struct ctl_resp *resp) {
        const struct ctl_api_call call = {
                .method = q->method,
                .path = q->path,
                .param = q->param,
                .query = q->query,
                .body = q->body.data ? q->body.data : "",
                .body_len = q->body.len,
                .via_cli = q->via_cli,
                .session_id = q->session_id,
        };
        int status = 0;
        char *json = NULL;
        int r;
        if (q->api_route->stream) {
                struct ctl_stream st = {0};
                r = q->api_route->stream(q->ctl->api_userdata, &call, &status, &json, &st);
                if (r >= 0 && st.read) {
                        free(json);
                        resp->status = 200;
                        resp->stream = st;
                        r = ctl_hdrs_add(&resp->hdrs, "Cache-Control", "no-store");
                        if (r >= 0 && st.disposition)
                                r = ctl_hdrs_add(&resp->hdrs, "Content-Disposition", st.disposition);
                        return r;
                }
        } else
                r = q->api_route->handler(q->ctl->api_userdata, &call, &status, &json);
        if (r >= 0 && (!json || status < 200 || status > 599)) {
                free(json);
                return log_error_errno(-EINVAL, "API route %s %s answered status %d%s", q->method,
                                       q->api_route->pattern, status, json ? "" : " without a body");
        }
        if (r < 0)
                return r;
        ctl_resp_take(resp, status, "application/json", json);
        return 0;
}

static int dispatch(struct ctl_req *q, struct ctl_resp *resp) {
        return q->route ? q->route->handler(q, resp) : call_api_route(q, resp);
}

static bool method_known(const char *m) {
        static const char *const known[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
        for (size_t i = 0; m && i < ARRAY_SIZE(known); i++)
                if (streq(m, known[i]))
                        return true;
        return false;
}

int ctl_routes_check(char **ret_error) {
        for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
                const struct ctl_route *e = &routes[i];
                if (!method_known(e->method) || !e->pattern || !startswith(e->pattern, "/_seed") || !e->handler ||
                    e->auth <= AUTH_UNSET || e->auth > AUTH_CLI ||
                    (is_api_path(e->pattern) && (e->auth != AUTH_API && e->auth != AUTH_CLI)) ||
                    (is_api_path(e->pattern) && e->where == ON_APP) || (e->image_body && !streq(e->method, "POST")) ||
                    (e->auth == AUTH_BADGE && e->where != ON_APP)) {
                        (void)xasprintf(ret_error, "route %zu (%s %s): needs a method, a /_seed path, a handler "
                                                   "and an auth level (API paths: API or CLI, on the control "
                                                   "plane's origin; the badge's: on the app's; picture "
                                                   "bodies: POST)",
                                        i, e->method ? e->method : "?", e->pattern ? e->pattern : "?");
                        return -EINVAL;
                }
        }
        return 0;
}

int ctl_api_routes_check(const struct ctl_api_route *table, char **ret_error) {
        for (size_t i = 0; table && table[i].pattern; i++) {
                const struct ctl_api_route *e = &table[i];
                bool one = (e->handler != NULL) != (e->stream != NULL);
                if (!method_known(e->method) || !startswith(e->pattern, "/_seed/api/") || !one ||
                    (e->stream && !streq(e->method, "GET"))) {
                        (void)xasprintf(ret_error, "API route %zu (%s %s): needs a method, a /_seed/api/ path and "
                                                   "exactly one of handler or stream (GET)",
                                        i, e->method ? e->method : "?", e->pattern);
                        return -EINVAL;
                }
        }
        return 0;
}

int ctl_seed_begin(struct ctl_req *q, struct ctl_resp *resp) {
        bool api = is_api_path(q->path), method_mismatch = false;
        int r;

        if (ctl_host_is_organism(ctl_req_header(q, "Host"))) {
                r = ctl_resp_set(resp, 421, "text/plain; charset=utf-8",
                                 "The control plane is not served on the organism's origin.\n");
                return r < 0 ? r : 1;
        }
        if (api && ctl_query_has_token(q->query)) {
                r = ctl_resp_error(resp, 400, "the API token goes in the X-Seed-Token header, never in a URL");
                return r < 0 ? r : 1;
        }
        for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
                char *param = NULL;
                if (!route_match(routes[i].pattern, q->path, &param))
                        continue;
                if (!streq(routes[i].method, q->method)) {
                        free(param);
                        method_mismatch = true;
                        continue;
                }
                q->route = &routes[i];
                q->param = param;
                break;
        }
        for (const struct ctl_api_route *e = q->ctl->api_routes;
             api && !q->route && !q->api_route && e && e->pattern; e++) {
                char *param = NULL;
                if (!route_match(e->pattern, q->path, &param))
                        continue;
                if (!streq(e->method, q->method)) {
                        free(param);
                        method_mismatch = true;
                        continue;
                }
                q->api_route = e;
                q->param = param;
        }

        /* Off the control plane's own origin only the health check and the
         * notice pages' stylesheet are served. */
        bool everywhere = q->route && q->route->auth == AUTH_NONE && q->route->handler != h_redirect_slash &&
                          q->route->where != ON_APP;
        bool app_only = q->route && q->route->where == ON_APP;
        if (app_only && own_origin(q->ctl) && ctl_req_on_control_host(q)) {
                r = not_found(q, false, resp);
                return r < 0 ? r : 1;
        }
        if (!everywhere && !app_only && !ctl_req_on_control_host(q)) {
                r = elsewhere_resp(q, api, resp);
                return r < 0 ? r : 1;
        }
        enum ctl_auth auth = q->route ? q->route->auth : api ? AUTH_API : AUTH_SESSION;
        r = auth_guard(q, auth, resp);
        if (r != 0)
                return r < 0 ? r : 1;
        if (q->via_cli || q->session_id) /* the owner's: out of the anonymous pool */
                ctl_req_authenticated(q);
        if (!q->route && !q->api_route) {
                if (method_mismatch) {
                        r = api ? ctl_resp_error(resp, 405, "method not allowed")
                                : ctl_resp_set(resp, 405, "text/plain; charset=utf-8", "Method not allowed\n");
                        return r < 0 ? r : 1;
                }
                r = not_found(q, api, resp);
                return r < 0 ? r : 1;
        }
        if (ctl_method_changes_state(q->method)) {
                r = q->route && q->route->auth == AUTH_FORM ? form_guard(q, resp)
                    : q->route && q->route->image_body       ? image_guard(q, resp)
                                                             : write_guard(q, resp);
                if (r != 0)
                        return r < 0 ? r : 1;
                return 0; /* read the body, then ctl_seed_finish */
        }
        r = dispatch(q, resp);
        return r < 0 ? r : 1;
}

int ctl_seed_finish(struct ctl_req *q, struct ctl_resp *resp) {
        if (q->body_overflow)
                return ctl_resp_error(resp, 413, q->route && q->route->image_body ? "the picture is larger than 3 MB"
                                                                               : "request body too large (at most 1 MiB)");
        return dispatch(q, resp);
}
