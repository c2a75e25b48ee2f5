#include "ctl/guard.h"
#include "base/text.h"
#include "ctl/http.h"

#include <ctype.h>
#include <strings.h>

/* Splits a Host value into its name (brackets kept for IPv6) and checks the
 * optional port. Returns the name length, or 0 if malformed. */
static size_t host_name_len(const char *host) {
        const char *port;
        size_t n;
        if (host[0] == '[') {
                const char *end = strchr(host, ']');
                if (!end || end == host + 1)
                        return 0;
                for (const char *p = host + 1; p < end; p++)
                        if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
                                return 0;
                n = (size_t)(end - host) + 1;
                port = end + 1;
                if (*port && *port != ':')
                        return 0;
        } else {
                port = strchr(host, ':');
                n = port ? (size_t)(port - host) : strlen(host);
                if (port && strchr(port + 1, ':'))
                        return 0;
                for (size_t i = 0; i < n; i++) {
                        char c = host[i];
                        if (!isalnum((unsigned char)c) && c != '-' && c != '.')
                                return 0;
                }
        }
        if (port && *port) {
                port++;
                size_t digits = strlen(port);
                if (digits == 0 || digits > 5 || strspn(port, "0123456789") != digits)
                        return 0;
                long v = strtol(port, NULL, 10);
                if (v < 1 || v > 65535)
                        return 0;
        }
        return n;
}

/* Whether name[0..n) is one or more DNS labels (letters, digits, '-'). */
static bool dns_labels_ok(const char *name, size_t n) {
        size_t label = 0;
        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                if (c == '.') {
                        if (label == 0)
                                return false;
                        label = 0;
                        continue;
                }
                if (!isalnum((unsigned char)c) && c != '-')
                        return false;
                if (++label > 63)
                        return false;
        }
        return label > 0;
}

static bool name_eq(const char *name, size_t n, const char *want) {
        return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

/* name[0..n) is "<labels>.<suffix>" (suffix without its leading dot). */
static bool name_is_subdomain(const char *name, size_t n, const char *suffix) {
        size_t sl = strlen(suffix);
        if (n < sl + 2 || name[n - sl - 1] != '.' || strncasecmp(name + n - sl, suffix, sl) != 0)
                return false;
        return dns_labels_ok(name, n - sl - 1);
}

bool ctl_host_allowed(const char *host, char *const *allowed_hosts) {
        if (strempty(host) || strlen(host) > 300)
                return false;
        size_t n = host_name_len(host);
        if (n == 0)
                return false;
        if (name_eq(host, n, "localhost") || name_eq(host, n, "127.0.0.1") ||
            name_eq(host, n, "[::1]") || name_is_subdomain(host, n, "localhost"))
                return true;
        for (char *const *a = allowed_hosts; a && *a; a++) {
                if (startswith(*a, "*.")) {
                        if (name_is_subdomain(host, n, *a + 2))
                                return true;
                } else if (**a && name_eq(host, n, *a))
                        return true;
        }
        return false;
}

bool ctl_host_is(const char *host, const char *name) {
        if (strempty(host) || strempty(name) || strlen(host) > 300)
                return false;
        size_t n = host_name_len(host);
        return n > 0 && name_eq(host, n, name);
}

bool ctl_host_is_organism(const char *host) {
        if (strempty(host))
                return false;
        size_t n = host_name_len(host);
        if (n == 0)
                return false;
        return name_eq(host, n, "organism.localhost") ||
               name_is_subdomain(host, n, "organism.localhost");
}

bool ctl_admin_screens_on(const char *control_host) {
        if (strempty(control_host) || ctl_host_is_organism(control_host))
                return false;
        size_t n = strlen(control_host);
        return n <= 253 && (name_eq(control_host, n, "localhost") || name_is_subdomain(control_host, n, "localhost"));
}

int ctl_origin_on_port_of(const char *name, const char *host, char **ret) {
        size_t n = strempty(host) || strlen(host) > 300 ? 0 : host_name_len(host);
        if (n == 0 || strempty(name))
                return -EINVAL;
        return xasprintf(ret, "http://%s%s", name, host + n) < 0 ? -ENOMEM : 0;
}

enum ctl_nav ctl_fetch_nav(const char *dest, const char *mode, const char *site) {
        if (!dest && !mode && !site)
                return CTL_NAV_MISSING;
        if (dest && mode && streq(dest, "document") && streq(mode, "navigate"))
                return CTL_NAV_OK;
        return CTL_NAV_REFUSED;
}

int ctl_check_same_origin(const char *site, const char *origin, const char *host, bool cli) {
        if (site) {
                if (!streq(site, "same-origin"))
                        return -EPERM;
        } else if (!cli)
                return -EPERM;
        if (origin) {
                if (strempty(host) || !startswith(origin, "http://") ||
                    strcasecmp(origin + strlen("http://"), host) != 0)
                        return -EPERM;
        }
        return 0;
}

bool ctl_method_changes_state(const char *method) {
        return !(streq(method, "GET") || streq(method, "HEAD") || streq(method, "OPTIONS"));
}

bool ctl_content_type_is_json(const char *ct) {
        static const char want[] = "application/json";
        if (!ct || strncasecmp(ct, want, strlen(want)) != 0)
                return false;
        const char *p = ct + strlen(want);
        while (*p == ' ' || *p == '\t')
                p++;
        return *p == 0 || *p == ';';
}

bool ctl_target_is_clean(const char *target) {
        if (!target || !*target)
                return false;
        for (const unsigned char *p = (const unsigned char *)target; *p; p++)
                if (*p <= 0x20 || *p >= 0x7f)
                        return false;
        return true;
}

static bool is_seed_path(const char *p) {
        return startswith(p, "/_seed") && (p[6] == 0 || p[6] == '/');
}

static bool has_dot_segment(const char *p) {
        for (const char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
                const char *seg = s + 1;
                size_t n = strcspn(seg, "/");
                if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
                        return true;
        }
        return false;
}

int ctl_path_classify(const char *path) {
        if (!path || path[0] != '/' || strlen(path) > 8192)
                return -EINVAL;
        _cleanup_free_ char *decoded = NULL;
        int r = percent_decode(path, strlen(path), false, &decoded);
        if (r < 0)
                return r;
        if (has_dot_segment(decoded))
                return -EINVAL;
        if (is_seed_path(decoded) != is_seed_path(path))
                return -EINVAL;
        return is_seed_path(path) ? CTL_PATH_SEED : CTL_PATH_ORGANISM;
}

/* Calls fn for each key=value pair of a raw query; stops when fn returns != 0. */
static int query_each(const char *query, int (*fn)(const char *k, size_t kl, const char *v,
                                                   size_t vl, void *u),
                      void *u) {
        if (!query)
                return 0;
        if (strlen(query) > 16384)
                return -EINVAL;
        for (const char *p = query; *p;) {
                size_t n = strcspn(p, "&");
                const char *eq = memchr(p, '=', n);
                size_t kl = eq ? (size_t)(eq - p) : n;
                const char *v = eq ? eq + 1 : p + n;
                size_t vl = eq ? n - kl - 1 : 0;
                int r = n ? fn(p, kl, v, vl, u) : 0;
                if (r != 0)
                        return r;
                p += n;
                if (*p == '&')
                        p++;
        }
        return 0;
}

struct query_find {
        const char *key;
        char *value;
};

static int query_find_one(const char *k, size_t kl, const char *v, size_t vl, void *u) {
        struct query_find *f = u;
        _cleanup_free_ char *key = NULL;
        int r = percent_decode(k, kl, true, &key);
        if (r < 0)
                return r;
        if (!streq(key, f->key))
                return 0;
        r = percent_decode(v, vl, true, &f->value);
        return r < 0 ? r : 1;
}

int ctl_query_get(const char *query, const char *key, char **ret) {
        struct query_find f = {.key = key};
        int r = query_each(query, query_find_one, &f);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        *ret = f.value;
        return 0;
}

static int query_token_one(const char *k, size_t kl, const char *v, size_t vl, void *u) {
        static const char *const names[] = {"token", "seed_token", "seed-token", "x-seed-token",
                                            "api_token", "api-token", "access_token"};
        _cleanup_free_ char *key = NULL;
        if (percent_decode(k, kl, true, &key) < 0)
                return 1; /* unreadable keys are treated as suspicious */
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (strcasecmp(key, names[i]) == 0)
                        return 1;
        return 0;
}

bool ctl_query_has_token(const char *query) {
        return query_each(query, query_token_one, NULL) != 0;
}
