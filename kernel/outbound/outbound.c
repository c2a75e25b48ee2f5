/* outbound.c — the owner's grants, the live organism's secrets, the
 * registries and the refusals, as one picture. See outbound.h. */
#include "outbound/outbound.h"
#include "base/buf.h"
#include "base/crypto.h"
#include "base/log.h"
#include "config/config.h"
#include "db/grants.h"
#include "egress/egress.h"
#include "model/providers.h"
#include "registries/registries.h"
#include "sandbox/sandbox.h"
#include "secrets/secrets.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>

/* An active grant, as the proxy knows it. */
struct grant {
        char *id;
        enum outbound_for scope;
        char **hosts;
        char **secrets;
};

struct outbound {
        struct outbound_config c;
        pthread_mutex_t lock;       /* grants, registries; held across proxy and DB calls of a change */
        struct grant *grants;
        size_t n_grants;
        struct registries reg;      /* as discovered (under lock) */
        bool reg_pending;           /* under lock */
        pthread_t discovery;
        bool discovery_started;
};

const char *outbound_for_name(enum outbound_for f) {
        return f == OUTBOUND_FOR_EVOLUTIONS ? "evolutions" : "organism";
}

static enum egress_scope scope_of(enum outbound_for f) {
        return f == OUTBOUND_FOR_EVOLUTIONS ? EGRESS_SCOPE_EVOLUTION : EGRESS_SCOPE_ORGANISM;
}

/* ---- checking a request ---- */

void outbound_request_done(struct outbound_request *r) {
        if (!r)
                return;
        strv_free(r->hosts);
        strv_free(r->secrets);
        free(r->reason);
        *r = (struct outbound_request){0};
}

/* A value from outside, safe to quote in an error: printable ASCII, bounded. */
static void quoted(char out[68], const char *s) {
        size_t n = 0;
        for (; s && *s && n < 64; s++)
                out[n++] = *s >= 0x20 && *s < 0x7f && *s != '\'' ? *s : '?';
        if (s && *s)
                out[n++] = '.', out[n++] = '.';
        out[n] = 0;
}

int outbound_secret_name_check(const char *name, const char *api_key_env, char **ret_error) {
        char q[68];
        quoted(q, name);
        size_t len = name ? strlen(name) : 0;
        bool ok = len >= 1 && len <= OUTBOUND_SECRET_NAME_MAX && name[0] >= 'A' && name[0] <= 'Z';
        for (size_t i = 1; ok && i < len; i++)
                ok = (name[i] >= 'A' && name[i] <= 'Z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '_';
        if (!ok)
                return errorf(-EINVAL, ret_error,
                              "'%s' is not a secret name: UPPER_SNAKE_CASE (A-Z, 0-9 and _, starting with a letter), "
                              "at most %d characters",
                              q, OUTBOUND_SECRET_NAME_MAX);
        if (startswith(name, "SEED_"))
                return errorf(-EINVAL, ret_error,
                              "%s: SEED_* variables are the kernel's own (the owner's sign-in and the like) and are "
                              "never granted",
                              name);
        size_t n = 0;
        const struct model_provider *p = model_providers(&n);
        bool model_key = !strempty(api_key_env) && streq(name, api_key_env);
        for (size_t i = 0; !model_key && i < n; i++)
                model_key = p[i].key_env && streq(name, p[i].key_env);
        if (model_key)
                return errorf(-EINVAL, ret_error, "%s is the model's key, which is the kernel's own and never granted",
                              name);
        if (sandbox_env_name_fixed(name))
                return errorf(-EINVAL, ret_error,
                              "%s is set by the sandbox itself (the path, port, database, proxy and the like) and "
                              "cannot be granted",
                              name);
        return 0;
}

int outbound_pattern_normalize(const char *pattern, char **ret, char **ret_error) {
        char q[68];
        quoted(q, pattern);
        size_t len = pattern ? strlen(pattern) : 0;
        if (len == 0 || len > EGRESS_HOST_MAX + 1)
                return errorf(-EINVAL, ret_error, "'%s' is empty or longer than %d characters", q, EGRESS_HOST_MAX);
        _cleanup_free_ char *p = strdup(pattern);
        if (!p)
                return -ENOMEM;
        if (p[len - 1] == '.')
                p[--len] = 0;
        for (char *s = p; *s; s++)
                *s = (char)tolower((unsigned char)*s);
        _cleanup_free_ char *why = NULL;
        int r = egress_pattern_check(p, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return errorf(-EINVAL, ret_error,
                              "'%s' cannot be granted: %s (write a host name such as api.example.com, or "
                              "*.example.com for its subdomains)",
                              q, why ? why : "malformed");
        *ret = TAKE_PTR(p);
        return 0;
}

static bool strv_has(char *const *v, const char *s) {
        for (; v && *v; v++)
                if (streq(*v, s))
                        return true;
        return false;
}

static int parse_hosts(json_t *v, struct outbound_request *req, char **ret_error) {
        if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > OUTBOUND_HOSTS_MAX)
                return errorf(-EINVAL, ret_error, "hosts: must be a list of 1 to %d host names", OUTBOUND_HOSTS_MAX);
        size_t i;
        json_t *h;
        json_array_foreach(v, i, h) {
                const char *s = json_string_value(h);
                _cleanup_free_ char *norm = NULL, *why = NULL;
                if (!s || strlen(s) != json_string_length(h))
                        return errorf(-EINVAL, ret_error, "hosts[%zu]: must be a string", i);
                int r = outbound_pattern_normalize(s, &norm, &why);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return errorf(-EINVAL, ret_error, "hosts[%zu]: %s", i, why);
                if (!strv_has(req->hosts, norm) && strv_push(&req->hosts, norm) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int parse_secrets(json_t *v, const char *api_key_env, struct outbound_request *req, char **ret_error) {
        if (v && (!json_is_array(v) || json_array_size(v) > OUTBOUND_SECRETS_MAX))
                return errorf(-EINVAL, ret_error, "secrets: must be a list of at most %d secret names",
                              OUTBOUND_SECRETS_MAX);
        size_t i;
        json_t *s;
        json_array_foreach(v, i, s) {
                const char *name = json_string_value(s);
                _cleanup_free_ char *why = NULL;
                if (!name || strlen(name) != json_string_length(s))
                        return errorf(-EINVAL, ret_error, "secrets[%zu]: must be a string", i);
                int r = outbound_secret_name_check(name, api_key_env, &why);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return errorf(-EINVAL, ret_error, "secrets[%zu]: %s", i, why);
                if (!strv_has(req->secrets, name) && strv_push(&req->secrets, name) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int outbound_request_parse(json_t *obj, const char *api_key_env, struct outbound_request *ret, char **ret_error) {
        if (!json_is_object(obj))
                return errorf(-EINVAL, ret_error, "the request must be a JSON object");
        const char *key;
        json_t *v;
        json_object_foreach(obj, key, v) {
                if (!streq(key, "hosts") && !streq(key, "for") && !streq(key, "secrets") && !streq(key, "reason")) {
                        char q[68];
                        quoted(q, key);
                        return errorf(-EINVAL, ret_error,
                                      "unknown field '%s' (a request has hosts, for, secrets and reason)", q);
                }
        }
        struct outbound_request req = {0};
        int r = 0;
        const char *scope = json_string_value(json_object_get(obj, "for"));
        json_t *reason = json_object_get(obj, "reason");
        if (!scope || (!streq(scope, "organism") && !streq(scope, "evolutions")))
                r = errorf(-EINVAL, ret_error, "for: must be \"organism\" (the live app) or \"evolutions\" "
                                               "(evolution, build and test commands)");
        else if (reason && (!json_is_string(reason) || json_string_length(reason) > OUTBOUND_REASON_MAX ||
                            strlen(json_string_value(reason)) != json_string_length(reason)))
                r = errorf(-EINVAL, ret_error, "reason: must be a string of at most %d bytes", OUTBOUND_REASON_MAX);
        else {
                req.scope = streq(scope, "evolutions") ? OUTBOUND_FOR_EVOLUTIONS : OUTBOUND_FOR_ORGANISM;
                if ((r = parse_hosts(json_object_get(obj, "hosts"), &req, ret_error)) >= 0)
                        r = parse_secrets(json_object_get(obj, "secrets"), api_key_env, &req, ret_error);
        }
        if (r >= 0 && !req.secrets && !(req.secrets = calloc(1, sizeof(char *))))
                r = -ENOMEM;
        if (r >= 0 && req.scope == OUTBOUND_FOR_EVOLUTIONS && req.secrets[0])
                r = errorf(-EINVAL, ret_error,
                           "secrets: only the live organism gets secrets (evolution, build and test commands never "
                           "do); ask with for: \"organism\"");
        if (r >= 0 && !(req.reason = strdup(reason ? json_string_value(reason) : "")))
                r = -ENOMEM;
        if (r < 0) {
                outbound_request_done(&req);
                return r;
        }
        *ret = req;
        return 0;
}

static json_t *strv_json(char *const *v) {
        json_t *a = json_array();
        for (; a && v && *v; v++)
                if (json_array_append_new(a, json_string(*v)) < 0) {
                        json_decref(a); /* plain: a is handed on below when nothing failed */
                        return NULL;
                }
        return a;
}

int outbound_request_check(struct outbound *o, json_t *obj, struct outbound_request *ret, char **ret_error) {
        return outbound_request_parse(obj, o->c.cfg->model.api_key_env, ret, ret_error);
}

json_t *outbound_request_json(const struct outbound_request *r) {
        _cleanup_json_ json_t *o = json_pack("{s:o?, s:s, s:o?}", "hosts", strv_json(r->hosts), "for",
                                             outbound_for_name(r->scope), "secrets", strv_json(r->secrets));
        if (!o || !json_object_get(o, "hosts") || !json_object_get(o, "secrets"))
                return NULL;
        if (!strempty(r->reason) && json_object_set_new(o, "reason", json_string(r->reason)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* ---- the active grants, in memory and at the proxy ---- */

static void grant_done(struct grant *g) {
        free(g->id);
        strv_free(g->hosts);
        strv_free(g->secrets);
        *g = (struct grant){0};
}

/* Whether another active grant (not skip) of scope holds pattern. Under lock. */
static bool held_elsewhere(struct outbound *o, const struct grant *skip, enum outbound_for scope, const char *pattern) {
        for (size_t i = 0; i < o->n_grants; i++)
                if (&o->grants[i] != skip && o->grants[i].scope == scope && strv_has(o->grants[i].hosts, pattern))
                        return true;
        return false;
}

/* Takes back at the proxy the first n patterns of g that no other grant
 * holds. Under lock. */
static void proxy_release(struct outbound *o, const struct grant *g, size_t n) {
        for (size_t i = 0; o->c.egress && i < n && g->hosts[i]; i++)
                if (!held_elsewhere(o, g, g->scope, g->hosts[i])) {
                        int r = egress_revoke(o->c.egress, scope_of(g->scope), g->hosts[i]);
                        if (r < 0 && r != -ENOENT)
                                log_warn_errno(r, "outbound: the proxy did not take back '%s': %m", g->hosts[i]);
                }
}

/* Gives the proxy every pattern of g (g not yet in o->grants). Under lock. */
static int proxy_take(struct outbound *o, const struct grant *g) {
        for (size_t i = 0; o->c.egress && g->hosts[i]; i++) {
                if (held_elsewhere(o, g, g->scope, g->hosts[i]))
                        continue;
                int r = egress_grant(o->c.egress, scope_of(g->scope), g->hosts[i]);
                if (r < 0) {
                        proxy_release(o, g, i);
                        return r;
                }
        }
        return 0;
}

static bool has_secrets(const struct grant *g) {
        return g->scope == OUTBOUND_FOR_ORGANISM && g->secrets && g->secrets[0];
}

static int strv_from_json(json_t *a, char ***ret) {
        char **v = calloc(json_array_size(a) + 1, sizeof *v);
        if (!v)
                return -ENOMEM;
        size_t i;
        json_t *s;
        json_array_foreach(a, i, s) {
                if (!json_is_string(s) || !(v[i] = strdup(json_string_value(s)))) {
                        strv_free(v);
                        return json_is_string(s) ? -ENOMEM : -EBADMSG;
                }
        }
        *ret = v;
        return 0;
}

/* One stored row as an active grant, checked again (rules may have
 * tightened since it was granted). */
static int grant_from_row(struct outbound *o, json_t *row, struct grant *ret) {
        struct grant g = {0};
        const char *id = json_string_value(json_object_get(row, "id"));
        const char *scope = json_string_value(json_object_get(row, "for"));
        int r = id && scope ? 0 : -EBADMSG;
        if (r == 0 && !(g.id = strdup(id)))
                r = -ENOMEM;
        g.scope = scope && streq(scope, "evolutions") ? OUTBOUND_FOR_EVOLUTIONS : OUTBOUND_FOR_ORGANISM;
        if (r == 0)
                r = strv_from_json(json_object_get(row, "hosts"), &g.hosts);
        if (r == 0)
                r = strv_from_json(json_object_get(row, "secrets"), &g.secrets);
        for (char **h = g.hosts; r == 0 && *h; h++) {
                _cleanup_free_ char *why = NULL;
                if (egress_pattern_check(*h, &why) < 0) {
                        log_warn("outbound: grant %s: '%s' is no longer accepted (%s); it is not given to the proxy",
                                 id, *h, why ? why : "refused");
                        r = -EINVAL;
                }
        }
        if (r < 0) {
                grant_done(&g);
                return r;
        }
        *ret = g;
        return 0;
}

static int load_grants(struct outbound *o) {
        _cleanup_free_ char *rows = NULL;
        int r = db_grants_active_json(o->c.kdb, &rows);
        if (r < 0)
                return log_error_errno(r, "outbound: cannot read the grants: %m");
        _cleanup_json_ json_t *arr = json_loads(rows, 0, NULL);
        size_t i;
        json_t *row;
        json_array_foreach(arr, i, row) {
                struct grant g;
                if ((r = grant_from_row(o, row, &g)) == -ENOMEM)
                        return r;
                if (r < 0 || o->n_grants >= OUTBOUND_GRANTS_MAX)
                        continue;
                if ((r = proxy_take(o, &g)) < 0) {
                        log_warn_errno(r, "outbound: the proxy refused grant %s: %m", g.id);
                        grant_done(&g);
                        continue;
                }
                o->grants[o->n_grants++] = g;
        }
        if (o->n_grants)
                log_info("outbound: %zu grant(s) given to the proxy", o->n_grants);
        return 0;
}

int outbound_new(const struct outbound_config *cfg, struct outbound **ret) {
        if (!cfg || !cfg->kdb || !cfg->cfg)
                return -EINVAL;
        struct outbound *o = calloc(1, sizeof *o);
        if (!o || !(o->grants = calloc(OUTBOUND_GRANTS_MAX, sizeof *o->grants))) {
                free(o);
                return -ENOMEM;
        }
        o->c = *cfg;
        pthread_mutex_init(&o->lock, NULL);
        int r = load_grants(o);
        if (r >= 0 && o->c.egress && (r = egress_set_registries(o->c.egress, o->c.cfg->egress.registries)) < 0)
                log_error_errno(r, "outbound: the proxy refused seed.yaml's egress.registries: %m");
        if (r < 0) {
                outbound_free(o);
                return r;
        }
        *ret = o;
        return 0;
}

void outbound_free(struct outbound *o) {
        if (!o)
                return;
        if (o->discovery_started)
                pthread_join(o->discovery, NULL);
        for (size_t i = 0; i < o->n_grants; i++)
                grant_done(&o->grants[i]);
        free(o->grants);
        registries_done(&o->reg);
        pthread_mutex_destroy(&o->lock);
        free(o);
}

/* ---- registries ---- */

int outbound_set_registries(struct outbound *o, const struct registries *r) {
        struct registries copy = {0};
        int k = 0;
        for (size_t i = 0; k >= 0 && i < r->n; i++)
                k = registries_add(&copy, r->v[i].host, r->v[i].from);
        for (char **n = r->notes; k >= 0 && n && *n; n++)
                k = registries_note(&copy, "%s", *n);
        _cleanup_strv_free_ char **hosts = NULL;
        if (k >= 0)
                k = registries_hosts(&copy, &hosts);
        if (k < 0) {
                registries_done(&copy);
                return k;
        }
        pthread_mutex_lock(&o->lock);
        if (o->c.egress && (k = egress_set_registries(o->c.egress, hosts)) < 0)
                log_error_errno(k, "outbound: the proxy refused the registries: %m");
        registries_done(&o->reg);
        o->reg = copy;
        o->reg_pending = false;
        pthread_mutex_unlock(&o->lock);
        return k < 0 ? k : 0;
}

static void *discovery_main(void *arg) {
        struct outbound *o = arg;
        struct registries r = {0};
        int k = registries_discover(o->c.cfg->egress.registries, &r);
        if (k < 0) {
                log_error_errno(k, "outbound: cannot ask the package clients for their registries: %m");
                pthread_mutex_lock(&o->lock);
                o->reg_pending = false;
                pthread_mutex_unlock(&o->lock);
                return NULL;
        }
        if (outbound_set_registries(o, &r) >= 0) {
                struct buf b = BUF_INIT(16 * 1024);
                for (size_t i = 0; i < r.n; i++)
                        (void)buf_printf(&b, "%s%s", i ? ", " : "", r.v[i].host);
                log_info("evolutions may reach %zu package registr%s: %s", r.n, r.n == 1 ? "y" : "ies",
                         b.len ? b.data : "none");
                buf_free(&b);
        }
        registries_done(&r);
        return NULL;
}

int outbound_discover_registries(struct outbound *o) {
        if (o->discovery_started)
                return -EALREADY;
        pthread_mutex_lock(&o->lock);
        o->reg_pending = true;
        pthread_mutex_unlock(&o->lock);
        int r = -pthread_create(&o->discovery, NULL, discovery_main, o);
        if (r < 0) {
                o->reg_pending = false;
                return log_error_errno(r, "outbound: cannot start asking the package clients: %m");
        }
        o->discovery_started = true;
        return 0;
}

/* ---- granting and revoking ---- */

static bool by_valid(const char *by) {
        if (!by)
                return false;
        if (streq(by, "owner"))
                return true;
        if (!startswith(by, "apr_") || strlen(by) != 20)
                return false;
        for (const char *p = by + 4; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

static void notify_env(struct outbound *o) {
        if (o->c.on_env)
                o->c.on_env(o->c.userdata);
}

int outbound_grant(struct outbound *o, const struct outbound_request *req, const char *by, char **ret_id) {
        if (!o || !req || !req->hosts || !req->hosts[0] || !req->secrets || !by_valid(by))
                return -EINVAL;
        _cleanup_free_ char *hex = NULL, *hosts = NULL, *secrets = NULL;
        int r = crypto_random_hex(8, &hex);
        if (r < 0)
                return r;
        struct grant g = {.scope = req->scope};
        _cleanup_json_ json_t *hj = strv_json(req->hosts), *sj = strv_json(req->secrets);
        if (xasprintf(&g.id, "grt_%s", hex) < 0 || !hj || !sj || !(hosts = json_dumps(hj, JSON_COMPACT)) ||
            !(secrets = json_dumps(sj, JSON_COMPACT)) || strv_from_json(hj, &g.hosts) < 0 ||
            strv_from_json(sj, &g.secrets) < 0) {
                grant_done(&g);
                return -ENOMEM;
        }
        pthread_mutex_lock(&o->lock);
        if (o->n_grants >= OUTBOUND_GRANTS_MAX)
                r = -E2BIG;
        else if ((r = proxy_take(o, &g)) >= 0 &&
                 (r = db_grant_insert(o->c.kdb, g.id, hosts, outbound_for_name(g.scope), secrets, req->reason, by,
                                      wall_ms())) < 0)
                proxy_release(o, &g, SIZE_MAX);
        if (r >= 0)
                o->grants[o->n_grants++] = g;
        pthread_mutex_unlock(&o->lock);
        if (r < 0) {
                grant_done(&g);
                return r;
        }
        log_info("outbound: grant %s by %s: %s for %s%s%s", g.id, by, hosts, outbound_for_name(req->scope),
                 req->secrets[0] ? ", secrets " : "", req->secrets[0] ? secrets : "");
        if (ret_id)
                *ret_id = strdup(o->grants[o->n_grants - 1].id); /* NULL when out of memory: the grant stands */
        if (has_secrets(&g))
                notify_env(o);
        return 0;
}

int outbound_revoke(struct outbound *o, const char *id) {
        if (!o || !id)
                return -EINVAL;
        pthread_mutex_lock(&o->lock);
        size_t i = 0;
        while (i < o->n_grants && !streq(o->grants[i].id, id))
                i++;
        int r = i < o->n_grants ? db_grant_revoke(o->c.kdb, id, wall_ms(), NULL) : -ENOENT;
        struct grant g = {0};
        if (r >= 0) {
                g = o->grants[i];
                o->grants[i] = o->grants[--o->n_grants];
                o->grants[o->n_grants] = (struct grant){0};
                proxy_release(o, &g, SIZE_MAX);
        }
        pthread_mutex_unlock(&o->lock);
        if (r < 0)
                return r;
        log_info("outbound: grant %s revoked by the owner", id);
        bool env = has_secrets(&g);
        grant_done(&g);
        if (env)
                notify_env(o);
        return 0;
}

/* ---- the live organism's secrets ---- */

void outbound_env_free(char **env) {
        for (char **e = env; e && *e; e++)
                secure_zero(*e, strlen(*e));
        strv_free(env);
}

int outbound_organism_env(struct outbound *o, char ***ret) {
        char **env = calloc(1, sizeof *env);
        int r = env ? 0 : -ENOMEM;
        pthread_mutex_lock(&o->lock);
        for (size_t i = 0; r == 0 && i < o->n_grants; i++) {
                if (!has_secrets(&o->grants[i]))
                        continue;
                for (char **s = o->grants[i].secrets; r == 0 && *s; s++) {
                        const char *value = o->c.secrets ? secrets_get(o->c.secrets, *s) : NULL;
                        size_t n = strlen(*s);
                        bool seen = false;
                        for (char **e = env; !seen && *e; e++)
                                seen = strncmp(*e, *s, n) == 0 && (*e)[n] == '=';
                        if (value && !seen)
                                r = strv_pushf(&env, "%s=%s", *s, value);
                }
        }
        pthread_mutex_unlock(&o->lock);
        if (r < 0) {
                outbound_env_free(env);
                return r;
        }
        *ret = env;
        return 0;
}

/* ---- the picture: API and the model ---- */

/* A stored row with its secrets as [{"name", "available"}]. */
static json_t *grant_json(struct outbound *o, json_t *row) {
        json_t *g = json_deep_copy(row);
        json_t *names = json_object_get(row, "secrets");
        _cleanup_json_ json_t *secrets = json_array();
        size_t i;
        json_t *n;
        if (!g || !secrets) {
                json_decref(g); /* plain: g is returned below when nothing failed */
                return NULL;
        }
        json_array_foreach(names, i, n) {
                const char *name = json_string_value(n);
                bool available = name && o->c.secrets && secrets_get(o->c.secrets, name);
                json_array_append_new(secrets, json_pack("{s:s, s:b}", "name", name ? name : "", "available", available));
        }
        json_object_set_new(g, "secrets", TAKE_PTR(secrets));
        return g;
}

static json_t *refusals_json(struct outbound *o) {
        _cleanup_json_ json_t *a = json_array();
        struct egress_refusal *v = NULL;
        size_t n = 0;
        if (!a || (o->c.egress && egress_refusals(o->c.egress, &v, &n) < 0))
                return NULL;
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, json_pack("{s:s, s:i, s:s, s:s, s:I}", "host", v[i].host, "port", v[i].port,
                                                   "door", v[i].door, "reason", v[i].reason ? v[i].reason : "refused",
                                                   "at", (json_int_t)v[i].at_ms));
        free(v);
        return TAKE_PTR(a);
}

int outbound_json(struct outbound *o, json_t **ret) {
        _cleanup_free_ char *rows = NULL, *active_rows = NULL;
        int r = db_grants_active_json(o->c.kdb, &active_rows);
        if (r >= 0)
                r = db_grants_json(o->c.kdb, &rows);
        if (r < 0)
                return log_error_errno(r, "outbound: cannot list the grants: %m");
        _cleanup_json_ json_t *all = json_loads(rows, 0, NULL), *live = json_loads(active_rows, 0, NULL);
        _cleanup_json_ json_t *active = json_array(), *revoked = json_array(), *reg = json_array(),
                              *notes = json_array(), *refused = refusals_json(o);
        if (!all || !live || !active || !revoked || !reg || !notes || !refused)
                return -ENOMEM;
        size_t k;
        json_t *row;
        json_array_foreach(live, k, row) json_array_append_new(active, grant_json(o, row)); /* oldest first */
        /* The newest revoked ones, for history. */
        json_array_foreach(all, k, row)
                if (!json_is_null(json_object_get(row, "revoked_at")) && json_array_size(revoked) < OUTBOUND_REVOKED_SHOWN)
                        json_array_append_new(revoked, grant_json(o, row));
        pthread_mutex_lock(&o->lock);
        bool pending = o->reg_pending;
        if (o->reg.n == 0 && !pending)
                for (char **h = o->c.cfg->egress.registries; h && *h; h++)
                        json_array_append_new(reg, json_pack("{s:s, s:s}", "host", *h, "from",
                                                             "seed.yaml egress.registries"));
        for (size_t i = 0; i < o->reg.n; i++)
                json_array_append_new(reg, json_pack("{s:s, s:s}", "host", o->reg.v[i].host, "from", o->reg.v[i].from));
        for (char **n = o->reg.notes; n && *n; n++)
                json_array_append_new(notes, json_string(*n));
        pthread_mutex_unlock(&o->lock);
        json_t *res = json_pack("{s:o, s:o, s:o, s:o, s:o, s:b}", "grants", TAKE_PTR(active), "revoked",
                                TAKE_PTR(revoked), "refused", TAKE_PTR(refused), "registries", TAKE_PTR(reg),
                                "registry_notes", TAKE_PTR(notes), "registries_pending", pending);
        if (!res)
                return -ENOMEM;
        *ret = res;
        return 0;
}

static void text_list(struct buf *b, json_t *arr) {
        size_t i;
        json_t *v;
        json_array_foreach(arr, i, v) (void)buf_printf(b, "%s%s", i ? ", " : "", json_string_value(v));
}

static void text_grants(struct buf *b, json_t *grants, const char *scope) {
        size_t i, shown = 0;
        json_t *g;
        json_array_foreach(grants, i, g) {
                if (!streq(json_string_value(json_object_get(g, "for")) ?: "", scope))
                        continue;
                (void)buf_puts(b, "- ");
                text_list(b, json_object_get(g, "hosts"));
                json_t *secrets = json_object_get(g, "secrets");
                size_t k;
                json_t *s;
                json_array_foreach(secrets, k, s) {
                        bool avail = json_is_true(json_object_get(s, "available"));
                        const char *name = json_string_value(json_object_get(s, "name"));
                        (void)buf_printf(b, "%s%s%s", k ? ", " : "; secrets: ", name,
                                         avail ? "" : " (not available: the owner must pass it with -e at start)");
                }
                (void)buf_printf(b, " [%s]\n", json_string_value(json_object_get(g, "id")));
                shown++;
        }
        if (!shown)
                (void)buf_puts(b, "(none)\n");
}

int outbound_status_text(struct outbound *o, char **ret) {
        _cleanup_json_ json_t *j = NULL;
        int r = outbound_json(o, &j);
        if (r < 0)
                return r;
        struct buf b = BUF_INIT(256 * 1024);
        (void)buf_puts(&b, "Hosts the live organism (and previews) may reach over HTTPS through HTTPS_PROXY:\n");
        text_grants(&b, json_object_get(j, "grants"), "organism");
        (void)buf_puts(&b, "\nHosts evolution, build and test commands may reach, besides the package registries:\n");
        text_grants(&b, json_object_get(j, "grants"), "evolutions");
        (void)buf_puts(&b, "\nPackage registries evolution, build and test commands may reach:\n");
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(j, "registries"), i, v)
                (void)buf_printf(&b, "- %s (%s)\n", json_string_value(json_object_get(v, "host")),
                                 json_string_value(json_object_get(v, "from")));
        if (json_array_size(json_object_get(j, "registries")) == 0)
                (void)buf_puts(&b, json_is_true(json_object_get(j, "registries_pending"))
                                           ? "(still being asked of the package clients)\n"
                                           : "(none)\n");
        (void)buf_puts(&b, "\nConnections the proxy refused recently, newest first:\n");
        json_array_foreach(json_object_get(j, "refused"), i, v) {
                const char *host = json_string_value(json_object_get(v, "host"));
                (void)buf_printf(&b, "- %s:%d from %s: %s\n", strempty(host) ? "(no well-formed host)" : host,
                                 (int)json_integer_value(json_object_get(v, "port")),
                                 json_string_value(json_object_get(v, "door")),
                                 json_string_value(json_object_get(v, "reason")));
        }
        if (json_array_size(json_object_get(j, "refused")) == 0)
                (void)buf_puts(&b, "(none)\n");
        (void)buf_puts(&b, "\nTo reach another host, call request_outbound_access with exactly the host names "
                           "needed, what they are for (organism or evolutions), the names of any secrets the live "
                           "organism needs, and why; the owner approves or denies each request.\n");
        if (!b.data)
                return -ENOMEM;
        *ret = buf_steal(&b);
        return 0;
}
