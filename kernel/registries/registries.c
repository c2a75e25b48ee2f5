/* registries.c — the package registries evolutions may reach, asked of the
 * machine's own package clients. See registries.h. */
#include "registries/registries.h"
#include "base/json.h"
#include "base/log.h"
#include "base/proc.h"
#include "egress/egress.h"

#include <ctype.h>
#include <stdarg.h>

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
#define LINE_SHOWN 120 /* bytes of a refused value shown in a note */

extern char **environ;

void registries_done(struct registries *r) {
        if (!r)
                return;
        for (size_t i = 0; i < r->n; i++) {
                free(r->v[i].host);
                free(r->v[i].from);
        }
        free(r->v);
        strv_free(r->notes);
        *r = (struct registries){0};
}

int registries_note(struct registries *r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *s = NULL;
        int k = xvasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        return strv_push(&r->notes, s);
}

/* A value from outside, safe to show: printable ASCII, at most LINE_SHOWN bytes. */
static void shown(char out[LINE_SHOWN + 4], const char *s, size_t len) {
        size_t n = 0;
        for (size_t i = 0; i < len && n < LINE_SHOWN; i++)
                out[n++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
        if (len > LINE_SHOWN)
                memcpy(out + n, "...", 3), n += 3;
        out[n] = 0;
}

/* ---- URLs ---- */

int registries_host_from_url(const char *url, char **ret_host, char **ret_error) {
        static const char scheme[] = "https://";
        size_t len = url ? strlen(url) : 0;
        if (len == 0 || len > REGISTRIES_URL_MAX)
                return errorf(-EINVAL, ret_error, "empty or longer than %d bytes", REGISTRIES_URL_MAX);
        if (len < strlen(scheme) || strncasecmp(url, scheme, strlen(scheme)) != 0)
                return errorf(-EINVAL, ret_error, "not an https:// URL (the proxy carries HTTPS only)");
        const char *auth = url + strlen(scheme);
        size_t alen = strcspn(auth, "/?#");
        if (memchr(auth, '@', alen))
                return errorf(-EINVAL, ret_error, "it holds credentials (user:password@), which are never used");
        if (alen == 0)
                return errorf(-EINVAL, ret_error, "no host");
        if (auth[0] == '[')
                return errorf(-EINVAL, ret_error, "an IP address, not a host name");
        const char *colon = memchr(auth, ':', alen);
        size_t hlen = colon ? (size_t)(colon - auth) : alen;
        if (colon && !(alen - hlen == 4 && strncmp(colon, ":443", 4) == 0))
                return errorf(-EINVAL, ret_error, "a port other than 443 (the proxy reaches port 443 only)");
        for (const char *p = auth + alen; *p; p++)
                if ((unsigned char)*p <= 0x20 || *p == 0x7f)
                        return errorf(-EINVAL, ret_error, "a space or control character in the URL");
        _cleanup_free_ char *host = strndup(auth, hlen);
        if (!host)
                return -ENOMEM;
        if (hlen > 0 && host[hlen - 1] == '.')
                host[--hlen] = 0;
        for (char *p = host; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        if (hlen == 0 || hlen > EGRESS_HOST_MAX)
                return errorf(-EINVAL, ret_error, "no host, or a host name over %d bytes", EGRESS_HOST_MAX);
        if (egress_is_ip_literal(host))
                return errorf(-EINVAL, ret_error, "an IP address, not a host name");
        if (egress_name_internal(host))
                return errorf(-EINVAL, ret_error, "an internal name, which the proxy never reaches");
        _cleanup_free_ char *why = NULL;
        int r = egress_pattern_check(host, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return errorf(-EINVAL, ret_error, "not a host name the proxy can allow (%s)", why ? why : "malformed");
        *ret_host = TAKE_PTR(host);
        return 0;
}

int registries_add(struct registries *r, const char *host, const char *from) {
        _cleanup_free_ char *why = NULL;
        int k = egress_pattern_check(host, &why);
        if (k == -ENOMEM)
                return k;
        if (k < 0) {
                char s[LINE_SHOWN + 4];
                shown(s, host, strlen(host));
                log_warn("registries: %s gave '%s', refused: %s", from, s, why ? why : "malformed");
                return registries_note(r, "%s: '%s' refused: %s", from, s, why ? why : "malformed") < 0 ? -ENOMEM
                                                                                                        : -EINVAL;
        }
        for (size_t i = 0; i < r->n; i++)
                if (streq(r->v[i].host, host))
                        return 0; /* there already, with its first source */
        if (r->n >= REGISTRIES_MAX)
                return registries_note(r, "%s: '%s' dropped: more than %d registries", from, host, REGISTRIES_MAX) < 0
                               ? -ENOMEM
                               : -E2BIG;
        struct registry *nv = realloc(r->v, (r->n + 1) * sizeof *nv);
        if (!nv)
                return -ENOMEM;
        r->v = nv;
        r->v[r->n] = (struct registry){.host = strdup(host), .from = strdup(from)};
        if (!r->v[r->n].host || !r->v[r->n].from) {
                free(r->v[r->n].host);
                free(r->v[r->n].from);
                return -ENOMEM;
        }
        r->n++;
        return 1;
}

/* url without its credentials (user:password@), for notes and logs. */
static char *without_credentials(const char *url) {
        const char *sep = strstr(url, "://");
        const char *auth = sep ? sep + 3 : url;
        size_t alen = strcspn(auth, "/?#");
        const char *at = NULL;
        for (const char *p = auth; p < auth + alen; p++)
                if (*p == '@')
                        at = p;
        char *s = NULL;
        if (!at)
                return strdup(url);
        return xasprintf(&s, "%.*s...@%s", (int)(auth - url), url, at + 1) < 0 ? NULL : s;
}

/* A URL from a client's configuration: its host is added, or a refusal
 * noted and logged. 1 added, 0 refused, -ENOMEM. */
static int add_url(struct registries *r, const char *url, size_t len, const char *from) {
        _cleanup_free_ char *u = strndup(url, len), *host = NULL, *why = NULL;
        if (!u)
                return -ENOMEM;
        int k = registries_host_from_url(u, &host, &why);
        if (k == -ENOMEM)
                return k;
        if (k < 0) {
                _cleanup_free_ char *clean = without_credentials(u);
                if (!clean)
                        return -ENOMEM;
                char s[LINE_SHOWN + 4];
                shown(s, clean, strlen(clean));
                log_warn("registries: %s gave '%s', refused: %s", from, s, why);
                return registries_note(r, "%s: '%s' refused: %s", from, s, why) < 0 ? -ENOMEM : 0;
        }
        k = registries_add(r, host, from);
        return k == -ENOMEM ? k : k > 0;
}

/* Whitespace-separated URLs of one value. Returns hosts added or -ENOMEM. */
static int add_urls(struct registries *r, const char *s, size_t len, const char *from) {
        int added = 0;
        for (size_t i = 0; i < len;) {
                while (i < len && isspace((unsigned char)s[i]))
                        i++;
                size_t j = i;
                while (j < len && !isspace((unsigned char)s[j]))
                        j++;
                if (j > i) {
                        int k = add_url(r, s + i, j - i, from);
                        if (k < 0)
                                return k;
                        added += k;
                }
                i = j;
        }
        return added;
}

/* ---- the clients' outputs (stdout and stderr together) ---- */

/* npm config get registry: the URL on a line of its own; warnings and
 * notices (which hold no "://") are ignored. */
static int parse_npm(struct registries *r, const char *from, const char *out) {
        int added = 0;
        for (const char *l = out; *l;) {
                size_t n = strcspn(l, "\n");
                size_t s = 0;
                while (s < n && isspace((unsigned char)l[s]))
                        s++;
                size_t e = n;
                while (e > s && isspace((unsigned char)l[e - 1]))
                        e--;
                if (e > s && memmem(l + s, e - s, "://", 3) && !memchr(l + s, ' ', e - s)) {
                        int k = add_url(r, l + s, e - s, from);
                        if (k < 0)
                                return k;
                        added += k;
                }
                l += n + (l[n] == '\n');
        }
        return added;
}

/* pip config list: lines "<scope>.<key>='<value>'" (":env:" is the
 * PIP_* environment); index-url and extra-index-url hold URLs separated by
 * whitespace. Other keys and lines are ignored. */
static int parse_pip(struct registries *r, const char *from, const char *out) {
        int added = 0;
        for (const char *l = out; *l;) {
                size_t n = strcspn(l, "\n");
                const char *eq = memchr(l, '=', n);
                if (eq) {
                        size_t klen = (size_t)(eq - l);
                        const char *dot = NULL;
                        for (const char *p = l; p < eq; p++)
                                if (*p == '.')
                                        dot = p;
                        const char *key = dot ? dot + 1 : l;
                        size_t keylen = (size_t)(eq - key);
                        bool wanted = (keylen == 9 && strncmp(key, "index-url", 9) == 0) ||
                                      (keylen == 15 && strncmp(key, "extra-index-url", 15) == 0);
                        const char *v = eq + 1;
                        size_t vlen = n - klen - 1;
                        if (vlen >= 2 && (v[0] == '\'' || v[0] == '"') && v[vlen - 1] == v[0]) {
                                v++;
                                vlen -= 2;
                        }
                        if (wanted) {
                                char src[64];
                                snprintf(src, sizeof src, "%s (%.*s)", from, (int)(keylen < 20 ? keylen : 20), key);
                                int k = add_urls(r, v, vlen, src);
                                if (k < 0)
                                        return k;
                                added += k;
                        }
                }
                l += n + (l[n] == '\n');
        }
        return added;
}

/* pip's own default: "<index URL> <file host>" on one line. */
static int parse_pip_default(struct registries *r, const char *from, const char *out) {
        const char *l = out;
        while (*l && isspace((unsigned char)*l))
                l++;
        size_t ulen = strcspn(l, " \t\r\n");
        const char *h = l + ulen;
        while (*h == ' ' || *h == '\t')
                h++;
        size_t hlen = strcspn(h, " \t\r\n");
        if (ulen == 0 || hlen == 0)
                return registries_note(r, "%s: no index and file host in pip's answer", from) < 0 ? -ENOMEM : 0;
        int added = add_url(r, l, ulen, from);
        if (added < 0)
                return added;
        _cleanup_free_ char *host = strndup(h, hlen);
        if (!host)
                return -ENOMEM;
        for (char *p = host; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        int k = registries_add(r, host, from);
        if (k == -ENOMEM)
                return k;
        return added + (k > 0);
}

/* GOSUMDB: "off", "<name>[+<key>]" (served at https://<name>) or
 * "<name>[+<key>] <URL>". */
static int add_gosumdb(struct registries *r, const char *v, const char *from) {
        size_t nlen = strcspn(v, " \t");
        if (nlen == 0 || (nlen == 3 && strncmp(v, "off", 3) == 0))
                return 0;
        const char *url = v + nlen;
        while (*url == ' ' || *url == '\t')
                url++;
        if (*url)
                return add_urls(r, url, strlen(url), from);
        size_t name = strcspn(v, "+ \t");
        _cleanup_free_ char *u = NULL;
        if (xasprintf(&u, "https://%.*s", (int)name, v) < 0)
                return -ENOMEM;
        return add_url(r, u, strlen(u), from);
}

/* go env -json GOPROXY GOSUMDB: {"GOPROXY": "a,b|direct", "GOSUMDB": "…"}. */
static int parse_go(struct registries *r, const char *from, const char *out) {
        const char *open = strchr(out, '{'), *close = strrchr(out, '}');
        if (!open || !close || close < open)
                return registries_note(r, "%s: no JSON in go's answer", from) < 0 ? -ENOMEM : 0;
        _cleanup_json_ json_t *o = json_loadb(open, (size_t)(close - open + 1), JSON_REJECT_DUPLICATES, NULL);
        const char *proxy = json_string_value(json_object_get(o, "GOPROXY"));
        const char *sumdb = json_string_value(json_object_get(o, "GOSUMDB"));
        if (!json_is_object(o))
                return registries_note(r, "%s: go's answer is not a JSON object", from) < 0 ? -ENOMEM : 0;
        int added = 0, k;
        char src[64];
        snprintf(src, sizeof src, "%s GOPROXY", from);
        for (const char *p = proxy ? proxy : ""; *p;) {
                size_t n = strcspn(p, ",|");
                bool skip = n == 0 || (n == 6 && strncmp(p, "direct", 6) == 0) || (n == 3 && strncmp(p, "off", 3) == 0);
                if (!skip && (k = add_url(r, p, n, src)) < 0)
                        return k;
                added += skip ? 0 : k;
                p += n + (p[n] != 0);
        }
        snprintf(src, sizeof src, "%s GOSUMDB", from);
        if (sumdb && (k = add_gosumdb(r, sumdb, src)) < 0)
                return k;
        return added + (sumdb ? k : 0);
}

/* ---- the table of clients ---- */

struct client {
        const char *name;           /* for registries_parse and the notes */
        const char *const argv[8];  /* argv[0] is looked up in PATH */
        const char *from;           /* the source shown beside each host */
        int (*parse)(struct registries *r, const char *from, const char *out);
        const char *unless;         /* skipped when this client gave a host */
};

static const struct client clients[] = {
        {"npm", {"npm", "config", "get", "registry", NULL}, "npm config get registry", parse_npm, NULL},
        {"pip", {"python3", "-m", "pip", "config", "list", NULL}, "pip config list", parse_pip, NULL},
        /* Nothing configured: pip's own default index and file host, as pip
         * itself names them (no host literal here). */
        {"pip-default",
         {"python3", "-c",
          "from pip._internal.models.index import PyPI; print(PyPI.simple_url, PyPI.file_storage_domain)", NULL},
         "pip's default index",
         parse_pip_default,
         "pip"},
        {"go", {"go", "env", "-json", "GOPROXY", "GOSUMDB", NULL}, "go env", parse_go, NULL},
};

int registries_parse(struct registries *r, const char *client, const char *output) {
        for (size_t i = 0; i < ARRAY_SIZE(clients); i++)
                if (streq(clients[i].name, client))
                        return clients[i].parse(r, clients[i].from, output ? output : "");
        return -EINVAL;
}

/* The program's path in PATH (the kernel's, or a plain default), or NULL. */
static char *find_program(const char *name) {
        const char *path = getenv("PATH");
        if (strempty(path))
                path = DEFAULT_PATH;
        for (const char *p = path; *p;) {
                size_t n = strcspn(p, ":");
                _cleanup_free_ char *full = NULL;
                if (n > 0 && p[0] == '/' && xasprintf(&full, "%.*s/%s", (int)n, p, name) >= 0 &&
                    access(full, X_OK) == 0)
                        return TAKE_PTR(full);
                p += n + (p[n] == ':');
        }
        return NULL;
}

/* Runs one client and parses its output. Returns hosts added (>= 0). */
static int ask_client(struct registries *r, const struct client *c) {
        _cleanup_free_ char *prog = find_program(c->argv[0]);
        if (!prog)
                return registries_note(r, "%s: '%s' is not installed (skipped)", c->name, c->argv[0]) < 0 ? -ENOMEM
                                                                                                             : 0;
        char *argv[ARRAY_SIZE(c->argv)];
        argv[0] = prog;
        for (size_t i = 1; i < ARRAY_SIZE(argv); i++)
                argv[i] = (char *)c->argv[i];
        struct proc_opts po = {
                .argv = argv,
                .envp = environ, /* the kernel's: the secrets were never in it */
                .stdin_fd = -1,
                .out_fd = -1,
                .timeout_ms = REGISTRIES_CLIENT_TIMEOUT_MS,
                .out_head = REGISTRIES_CLIENT_OUTPUT_MAX,
                .out_tail = 1,
        };
        struct proc_result res = {0};
        int k = proc_run(&po, &res);
        if (k < 0) {
                log_warn_errno(k, "registries: cannot run %s: %m", prog);
                return registries_note(r, "%s: cannot run %s: %s (skipped)", c->name, prog, strerror(-k)) < 0 ? -ENOMEM
                                                                                                             : 0;
        }
        if (res.timed_out || res.exit_code != 0) {
                log_warn("registries: %s %s (skipped)", c->from,
                         res.timed_out ? "did not answer in time" : "failed");
                k = res.timed_out ? registries_note(r, "%s: did not answer within %d s (skipped)", c->from,
                                                    REGISTRIES_CLIENT_TIMEOUT_MS / 1000)
                                  : registries_note(r, "%s: exited with code %d (skipped)", c->from, res.exit_code);
                proc_result_done(&res);
                return k < 0 ? -ENOMEM : 0;
        }
        k = c->parse(r, c->from, res.output ? res.output : "");
        proc_result_done(&res);
        return k;
}

int registries_discover(char *const *configured, struct registries *ret) {
        struct registries r = {0};
        int k = 0;
        int found[ARRAY_SIZE(clients)] = {0};
        for (size_t i = 0; i < ARRAY_SIZE(clients) && k >= 0; i++) {
                const struct client *c = &clients[i];
                bool skip = false;
                for (size_t j = 0; c->unless && j < i; j++)
                        skip = skip || (streq(clients[j].name, c->unless) && found[j] > 0);
                if (skip)
                        continue;
                k = found[i] = ask_client(&r, c);
                bool followed = false; /* a later row asks again when this one named nothing */
                for (size_t j = i + 1; j < ARRAY_SIZE(clients); j++)
                        followed = followed || (clients[j].unless && streq(clients[j].unless, c->name));
                if (k == 0 && !followed && registries_note(&r, "%s: named no registry", c->from) < 0)
                        k = -ENOMEM;
        }
        for (char *const *h = configured; k >= 0 && h && *h; h++)
                if ((k = registries_add(&r, *h, "seed.yaml egress.registries")) >= 0 || k == -EINVAL || k == -E2BIG)
                        k = 0;
        if (k == -ENOMEM) {
                registries_done(&r);
                return k;
        }
        *ret = r;
        return 0;
}

int registries_hosts(const struct registries *r, char ***ret) {
        char **v = calloc(r->n + 1, sizeof *v);
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < r->n; i++)
                if (!(v[i] = strdup(r->v[i].host))) {
                        strv_free(v);
                        return -ENOMEM;
                }
        *ret = v;
        return 0;
}

int registries_print(const struct registries *r, FILE *f) {
        fprintf(f, "Registries evolutions may reach (through the egress proxy):\n");
        if (r->n == 0)
                fprintf(f, "  (none: evolution, build and test commands cannot install packages)\n");
        for (size_t i = 0; i < r->n; i++)
                fprintf(f, "  %-40s (%s)\n", r->v[i].host, r->v[i].from);
        for (char **n = r->notes; n && *n; n++)
                fprintf(f, "  note: %s\n", *n);
        return ferror(f) ? -EIO : 0;
}
