/* mind.c — the model the Seed thinks with. See mind.h. */
#include "mind/mind.h"
#include "base/crypto.h"
#include "base/log.h"
#include "config/config.h"
#include "db/db.h"
#include "model/providers.h"
#include "secrets/secrets.h"

#include <pthread.h>
#include <stdatomic.h>

#define PROBE_ATTEMPTS 2

/* A model and the calls using it. The mind holds one reference on the
 * current one; each call in flight holds another. */
struct handle {
        struct model *model;
        unsigned refs;
};

/* A provider's list of models, as JSON text, for the key it was fetched with. */
struct models_cache {
        char key_hash[SHA256_HEX_LEN + 1];  /* sha256 of the key, "" for none */
        int64_t fetched_ms;
        char *json;
};

struct mind {
        pthread_mutex_t lock;           /* everything below */
        pthread_mutex_t choosing;       /* one probe at a time */
        const struct cfg *cfg;
        const struct secrets *secrets;
        struct db *kdb;
        model_usage_fn usage_fn;
        void *usage_userdata;
        int timeout_ms, backoff_base_ms;
        char *endpoint_for_tests;               /* NULL but in tests */
        const struct model_provider *providers; /* the table */
        size_t n_providers;
        const struct model_provider *provider;  /* the choice */
        char *name;
        bool chosen;                    /* a kept choice, not seed.yaml's */
        char **lent;                    /* per provider (table order): a lent key or NULL */
        struct models_cache *cache;     /* per provider */
        struct handle *current;         /* NULL: cannot think, why_not says why */
        char *why_not;
        _Atomic uint64_t changes;       /* bumped under the lock with each change the status shows */
};

static void unlockp(pthread_mutex_t **l) {
        if (*l)
                pthread_mutex_unlock(*l);
}
#define LOCKED(l)                                                              \
        _cleanup_(unlockp) pthread_mutex_t *_guard = (l);                      \
        pthread_mutex_lock(_guard)

/* A copy of a key: wiped before it is freed. */
static void key_free(char *k) {
        if (k) {
                secure_zero(k, strlen(k));
                free(k);
        }
}

const char *mind_key_source_name(enum mind_key_source s) {
        switch (s) {
        case MIND_KEY_START: return "start";
        case MIND_KEY_LENT: return "lent";
        case MIND_KEY_NONE: return "none";
        case MIND_KEY_NOT_NEEDED: return "not_needed";
        }
        return "none";
}

/* ---- providers and keys (under the lock) ---- */

static size_t provider_index(const struct mind *m, const struct model_provider *p) {
        return (size_t)(p - m->providers);
}

/* Whether the control plane may offer p: openai-compatible only where
 * seed.yaml names its base_url (its one host). */
static bool provider_available(const struct mind *m, const struct model_provider *p) {
        return p->endpoint || !strempty(m->cfg->model.base_url);
}

/* The variable holding p's key, or NULL when p needs none. */
static const char *provider_key_env(const struct mind *m, const struct model_provider *p) {
        if (p->key_env)
                return p->key_env;
        return strempty(m->cfg->model.api_key_env) ? NULL : m->cfg->model.api_key_env;
}

/* p's key (borrowed: valid under the lock) and where it comes from. */
static enum mind_key_source provider_key(const struct mind *m, const struct model_provider *p, const char **ret_key) {
        const char *lent = m->lent[provider_index(m, p)];
        const char *env = provider_key_env(m, p);
        const char *start = env && m->secrets ? secrets_get(m->secrets, env) : NULL;
        *ret_key = NULL;
        if (lent) {
                *ret_key = lent;
                return MIND_KEY_LENT;
        }
        if (!strempty(start)) {
                *ret_key = start;
                return MIND_KEY_START;
        }
        return env ? MIND_KEY_NONE : MIND_KEY_NOT_NEEDED;
}

static int no_key_message(const struct mind *m, const struct model_provider *p, char **ret) {
        return xasprintf(ret, "No model key: the Seed cannot think yet. Start it with -e %s (or lend a key in Settings).",
                         provider_key_env(m, p));
}

/* The provider called name that the control plane may use; else -EINVAL
 * with a message. */
static int provider_usable(const struct mind *m, const char *name, const struct model_provider **ret,
                           char **ret_error) {
        const struct model_provider *p = model_provider_find(name);
        if (!p) {
                _cleanup_free_ char *names = model_provider_names(" or ");
                (void)xasprintf(ret_error, "Unknown provider: choose %s.", names ? names : "a known one");
                return -EINVAL;
        }
        if (!provider_available(m, p)) {
                (void)xasprintf(ret_error, "The provider %s needs model.base_url in seed.yaml: its address is never "
                                           "set from the control plane.",
                                p->name);
                return -EINVAL;
        }
        *ret = p;
        return 0;
}

/* A model for p and name with its key: *ret, or *ret_error. */
static int build_model(const struct mind *m, const struct model_provider *p, const char *name, const char *key,
                       int timeout_ms, int max_attempts, struct model **ret, char **ret_error) {
        struct model_config mc = {
                .provider = p->name,
                .name = name,
                .base_url = m->cfg->model.base_url,
                .api_key = key,
                .max_tokens = m->cfg->model.max_tokens,
                .timeout_ms = timeout_ms,
                .max_attempts = max_attempts,
                .backoff_base_ms = m->backoff_base_ms,
        };
        struct model *model = NULL;
        int r = model_new(&mc, &model, ret_error);
        if (r < 0)
                return r;
        if (m->endpoint_for_tests && (r = model_set_endpoint_for_tests(model, m->endpoint_for_tests)) < 0) {
                model_free(model);
                return r;
        }
        model_set_usage_hook(model, m->usage_fn, m->usage_userdata);
        *ret = model;
        return 0;
}

/* ---- the current model ---- */

/* One reference less; the last one frees the model (wiping its key copy). */
static void handle_unref_locked(struct handle *h) {
        if (h && --h->refs == 0) {
                model_free(h->model);
                free(h);
        }
}

static void handle_put(struct mind *m, struct handle *h) {
        LOCKED(&m->lock);
        handle_unref_locked(h);
}

/* Replaces the current model by one built from the choice and its key, or
 * by none with the reason. Under the lock; the old one is freed once its
 * last call returns. Logs what changed. */
static void rebuild_locked(struct mind *m) {
        const char *key = NULL;
        enum mind_key_source src = provider_key(m, m->provider, &key);
        struct model *model = NULL;
        _cleanup_free_ char *why = NULL, *err = NULL;
        if (src == MIND_KEY_NONE)
                (void)no_key_message(m, m->provider, &why);
        else if (build_model(m, m->provider, m->name, key, m->timeout_ms, 0, &model, &err) < 0)
                (void)xasprintf(&why, "The model cannot be used: %s", err ? err : "out of memory");
        struct handle *h = model ? calloc(1, sizeof *h) : NULL;
        if (h)
                *h = (struct handle){.model = model, .refs = 1};
        else
                model_free(model); /* NULL, or out of memory for its handle */
        handle_unref_locked(m->current);
        m->current = h;
        free(m->why_not);
        m->why_not = h ? NULL : why ? TAKE_PTR(why) : strdup("The model cannot be used: out of memory");
        m->changes++;
        if (h)
                log_info("thinking with %s via %s (key: %s)", m->name, m->provider->name, mind_key_source_name(src));
        else
                log_warn("%s", m->why_not ? m->why_not : "the model cannot be used");
}

static struct handle *handle_get(struct mind *m, char **ret_why) {
        LOCKED(&m->lock);
        if (m->current) {
                m->current->refs++;
                return m->current;
        }
        *ret_why = strdup(m->why_not ? m->why_not : "The model cannot be used.");
        return NULL;
}

int mind_complete(struct mind *m, const struct model_request *req, struct model_response *ret, char **ret_error) {
        _cleanup_free_ char *why = NULL;
        struct handle *h = handle_get(m, &why);
        if (!h) {
                if (ret_error)
                        *ret_error = TAKE_PTR(why);
                return -ENOKEY;
        }
        int r = model_complete(h->model, req, ret, ret_error);
        handle_put(m, h);
        return r;
}

bool mind_ready(struct mind *m) {
        LOCKED(&m->lock);
        return m->current != NULL;
}

char *mind_why_not(struct mind *m) {
        LOCKED(&m->lock);
        return m->current ? NULL : strdup(m->why_not ? m->why_not : "The model cannot be used.");
}

/* ---- the kept choice ---- */

/* The choice kept in the kernel DB, if there is a valid one. */
static void choice_load(struct mind *m) {
        _cleanup_free_ char *text = NULL;
        if (!m->kdb || db_setting_get(m->kdb, MIND_SETTING, &text) < 0)
                return;
        _cleanup_json_ json_t *o = json_loads(text, 0, NULL);
        const char *provider = json_string_value(json_object_get(o, "provider"));
        const char *name = json_string_value(json_object_get(o, "model"));
        const struct model_provider *p = model_provider_find(provider);
        char *copy = NULL;
        if (!p || !provider_available(m, p) || !model_id_valid(name) || !(copy = strdup(name))) {
                log_warn("the model chosen in the control plane is not usable here (provider '%.40s'): thinking "
                         "with seed.yaml's",
                         p ? p->name : "?");
                return;
        }
        free(m->name);
        m->name = copy;
        m->provider = p;
        m->chosen = true;
}

static int choice_store(struct mind *m, const struct model_provider *p, const char *name) {
        if (!m->kdb)
                return 0;
        _cleanup_json_ json_t *o = json_pack("{s:s, s:s}", "provider", p->name, "model", name);
        _cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (!text)
                return -ENOMEM;
        return db_setting_set(m->kdb, MIND_SETTING, text);
}

/* ---- lifetime ---- */

int mind_new(const struct mind_config *c, struct mind **ret) {
        if (!c || !c->cfg)
                return -EINVAL;
        const struct model_provider *p = model_provider_find(c->cfg->model.provider);
        if (!p)
                return -EINVAL; /* config validates it */
        struct mind *m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        pthread_mutex_init(&m->lock, NULL);
        pthread_mutex_init(&m->choosing, NULL);
        m->cfg = c->cfg;
        m->secrets = c->secrets;
        m->kdb = c->kdb;
        m->usage_fn = c->usage_fn;
        m->usage_userdata = c->usage_userdata;
        m->timeout_ms = c->timeout_ms;
        m->backoff_base_ms = c->backoff_base_ms;
        m->endpoint_for_tests = c->endpoint_for_tests ? strdup(c->endpoint_for_tests) : NULL;
        m->providers = model_providers(&m->n_providers);
        m->provider = p;
        m->name = strdup(c->cfg->model.name);
        m->lent = calloc(m->n_providers, sizeof *m->lent);
        m->cache = calloc(m->n_providers, sizeof *m->cache);
        if (!m->name || !m->lent || !m->cache || (c->endpoint_for_tests && !m->endpoint_for_tests)) {
                mind_free(m);
                return -ENOMEM;
        }
        choice_load(m);
        {
                LOCKED(&m->lock);
                rebuild_locked(m);
        }
        *ret = m;
        return 0;
}

void mind_free(struct mind *m) {
        if (!m)
                return;
        for (size_t i = 0; m->lent && i < m->n_providers; i++)
                key_free(m->lent[i]);
        for (size_t i = 0; m->cache && i < m->n_providers; i++)
                free(m->cache[i].json);
        if (m->current) {
                model_free(m->current->model);
                free(m->current);
        }
        free(m->lent);
        free(m->cache);
        free(m->name);
        free(m->endpoint_for_tests);
        free(m->why_not);
        pthread_mutex_destroy(&m->lock);
        pthread_mutex_destroy(&m->choosing);
        free(m);
}

/* ---- what the mind is ---- */

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *providers_json_locked(const struct mind *m) {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < m->n_providers; i++) {
                const struct model_provider *p = &m->providers[i];
                const char *key = NULL;
                enum mind_key_source src = provider_key(m, p, &key);
                json_array_append_new(arr, json_pack("{s:s, s:o, s:s, s:b}", "name", p->name, "key_env",
                                                     str_or_null(provider_key_env(m, p)), "key_source",
                                                     mind_key_source_name(src), "available",
                                                     provider_available(m, p)));
        }
        return arr;
}

uint64_t mind_status_version(struct mind *m) {
        return m ? m->changes : 0;
}

int mind_status_json(struct mind *m, bool full, json_t **ret) {
        LOCKED(&m->lock);
        const char *key = NULL;
        enum mind_key_source src = provider_key(m, m->provider, &key);
        _cleanup_json_ json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:b, s:o}", "provider", m->provider->name, "model",
                                             m->name, "key_source", mind_key_source_name(src), "key_env",
                                             str_or_null(provider_key_env(m, m->provider)), "ready",
                                             m->current != NULL, "why_not",
                                             str_or_null(m->current ? NULL : m->why_not));
        if (!o)
                return -ENOMEM;
        if (full && (json_object_set_new(o, "default",
                                          json_pack("{s:s, s:s}", "provider", m->cfg->model.provider, "model",
                                                    m->cfg->model.name)) < 0 ||
                     json_object_set_new(o, "chosen", json_boolean(m->chosen)) < 0 ||
                     json_object_set_new(o, "providers", providers_json_locked(m)) < 0))
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* ---- choosing, lending, forgetting ---- */

/* For provider: a model built with its key (for a probe or a list), or an
 * error. name NULL: the current choice's name (a list needs none). */
static int model_for(struct mind *m, const char *provider, const char *name, int timeout_ms, int attempts,
                     const struct model_provider **ret_p, struct model **ret, char **ret_key_hash, char **ret_error) {
        LOCKED(&m->lock);
        const struct model_provider *p = NULL;
        int r = provider_usable(m, provider, &p, ret_error);
        if (r < 0)
                return r;
        const char *key = NULL;
        if (provider_key(m, p, &key) == MIND_KEY_NONE) {
                (void)no_key_message(m, p, ret_error);
                return -ENOKEY;
        }
        if (ret_key_hash) {
                char hex[SHA256_HEX_LEN + 1] = "";
                if (key)
                        crypto_sha256_hex(key, strlen(key), hex);
                if (!(*ret_key_hash = strdup(hex)))
                        return -ENOMEM;
        }
        _cleanup_free_ char *err = NULL;
        r = build_model(m, p, name ? name : m->name, key, timeout_ms, attempts, ret, &err);
        if (r < 0) {
                (void)xasprintf(ret_error, "The model cannot be used: %s", err ? err : strerror(-r));
                if (ret_key_hash)
                        free(TAKE_PTR(*ret_key_hash));
                return r;
        }
        *ret_p = p;
        return 0;
}

/* One short real call offering one trivial tool: a model that cannot take
 * tools, a wrong name or a refused key fails here. */
static int probe(struct model *model, char **ret_error) {
        static const struct model_tool_def tool = {
                .name = "ready",
                .description = "Say that you are ready.",
                .parameters = "{\"type\":\"object\",\"properties\":{}}",
        };
        const struct model_message user = {.role = MODEL_ROLE_USER,
                                            .text = "This is a connection check. Reply with the single word: ready."};
        struct model_response res = {0};
        int r = model_complete(model,
                               &(struct model_request){.system = "Answer in one word.", .messages = &user,
                                                       .n_messages = 1, .tools = &tool, .n_tools = 1,
                                                       .max_tokens = MIND_PROBE_MAX_TOKENS, .purpose = "probe"},
                               &res, ret_error);
        model_response_done(&res);
        return r;
}

int mind_choose(struct mind *m, const char *provider, const char *name, char **ret_error) {
        if (!model_id_valid(name)) {
                (void)xasprintf(ret_error, "The model name must be 1 to %d printable characters.", MODEL_ID_MAX);
                return -EINVAL;
        }
        if (pthread_mutex_trylock(&m->choosing) != 0) {
                (void)xasprintf(ret_error, "Another model is being checked; try again in a moment.");
                return -EBUSY;
        }
        _cleanup_(unlockp) pthread_mutex_t *choosing = &m->choosing;
        const struct model_provider *p = NULL;
        _cleanup_(model_freep) struct model *candidate = NULL;
        int r = model_for(m, provider, name, MIND_PROBE_TIMEOUT_MS, PROBE_ATTEMPTS, &p, &candidate, NULL, ret_error);
        if (r < 0)
                return r;
        _cleanup_free_ char *err = NULL;
        r = probe(candidate, &err);
        if (r < 0) {
                log_info("the model %s via %s did not pass its check: %s", name, p->name, err ? err : "?");
                (void)xasprintf(ret_error, "The model did not answer the check: %s", err ? err : strerror(-r));
                return r;
        }
        r = choice_store(m, p, name);
        if (r < 0) {
                (void)xasprintf(ret_error, "The model works, but the choice could not be kept: %s", strerror(-r));
                return -EIO;
        }
        char *copy = strdup(name);
        if (!copy)
                return -ENOMEM;
        LOCKED(&m->lock);
        free(m->name);
        m->name = copy;
        m->provider = p;
        m->chosen = true;
        log_info("the owner chose the model %s via %s", name, p->name);
        rebuild_locked(m);
        return 0;
}

static bool key_valid(const char *key) {
        size_t n = key ? strlen(key) : 0;
        if (n == 0 || n > MIND_KEY_MAX)
                return false;
        for (const unsigned char *p = (const unsigned char *)key; *p; p++)
                if (*p <= 0x20 || *p > 0x7e)
                        return false;
        return true;
}

int mind_lend_key(struct mind *m, const char *provider, const char *key, char **ret_error) {
        if (!key_valid(key)) {
                (void)xasprintf(ret_error, "A key is 1 to %d printable characters, without spaces.", MIND_KEY_MAX);
                return -EINVAL;
        }
        char *copy = strdup(key);
        if (!copy)
                return -ENOMEM;
        LOCKED(&m->lock);
        const struct model_provider *p = NULL;
        int r = provider_usable(m, provider, &p, ret_error);
        if (r < 0) {
                key_free(copy);
                return r;
        }
        size_t i = provider_index(m, p);
        key_free(m->lent[i]);
        m->lent[i] = copy;
        m->changes++;
        log_info("a model key for %s was lent in the control plane (kept in memory until the kernel stops)", p->name);
        if (p == m->provider)
                rebuild_locked(m);
        return 0;
}

int mind_forget_key(struct mind *m, const char *provider) {
        const struct model_provider *p = provider ? model_provider_find(provider) : NULL;
        if (provider && !p)
                return -EINVAL;
        LOCKED(&m->lock);
        int n = 0;
        bool current = false;
        for (size_t i = 0; i < m->n_providers; i++) {
                if ((p && &m->providers[i] != p) || !m->lent[i])
                        continue;
                key_free(TAKE_PTR(m->lent[i]));
                m->changes++;
                log_info("the model key lent for %s was forgotten", m->providers[i].name);
                current = current || &m->providers[i] == m->provider;
                n++;
        }
        if (current)
                rebuild_locked(m);
        return n;
}

/* ---- the models a provider offers ---- */

static int list_json(const struct model_provider *p, const struct model_list *l, int64_t at, char **ret) {
        _cleanup_json_ json_t *models = json_array();
        if (!models)
                return -ENOMEM;
        for (size_t i = 0; i < l->n; i++) {
                const struct model_info *mi = &l->models[i];
                json_t *tools = mi->tools < 0 ? json_null() : json_boolean(mi->tools);
                if (json_array_append_new(models, json_pack("{s:s, s:o, s:o, s:I}", "id", mi->id, "name",
                                                            str_or_null(mi->name), "tools", tools, "context_length",
                                                            (json_int_t)mi->context_length)) < 0)
                        return -ENOMEM;
        }
        _cleanup_json_ json_t *o = json_pack("{s:s, s:o, s:b, s:I}", "provider", p->name, "models", TAKE_PTR(models),
                                             "truncated", l->truncated, "fetched_at", (json_int_t)at);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* A copy of the cached list of provider index i for key_hash, if fresh. */
static char *cache_get(struct mind *m, size_t i, const char *key_hash) {
        LOCKED(&m->lock);
        struct models_cache *c = &m->cache[i];
        if (!c->json || !streq(c->key_hash, key_hash) || now_ms() - c->fetched_ms > MIND_MODELS_TTL_MS)
                return NULL;
        return strdup(c->json);
}

static void cache_put(struct mind *m, size_t i, const char *key_hash, const char *json) {
        char *copy = strdup(json);
        if (!copy)
                return;
        LOCKED(&m->lock);
        struct models_cache *c = &m->cache[i];
        free(c->json);
        c->json = copy;
        c->fetched_ms = now_ms();
        snprintf(c->key_hash, sizeof c->key_hash, "%s", key_hash);
}

int mind_models_json(struct mind *m, const char *provider, char **ret_json, char **ret_error) {
        const struct model_provider *p = NULL;
        _cleanup_(model_freep) struct model *lister = NULL;
        _cleanup_free_ char *key_hash = NULL;
        int r = model_for(m, provider, NULL, MODEL_LIST_TIMEOUT_MS, 1, &p, &lister, &key_hash, ret_error);
        if (r < 0)
                return r;
        size_t i = provider_index(m, p);
        char *cached = cache_get(m, i, key_hash);
        if (cached) {
                *ret_json = cached;
                return 0;
        }
        struct model_list l = {0};
        r = model_list(lister, &l, ret_error);
        if (r < 0)
                return r;
        char *json = NULL;
        r = list_json(p, &l, wall_ms(), &json);
        model_list_done(&l);
        if (r < 0)
                return r;
        cache_put(m, i, key_hash, json);
        *ret_json = json;
        return 0;
}
