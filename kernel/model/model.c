/* model.c — providers, the retrying call, and conversation helpers. The wire
 * formats live in provider-openai.c and provider-anthropic.c. */
#include "model/model-internal.h"
#include "base/crypto.h"
#include "base/log.h"
#include "base/text.h"
#include "httpc/httpc.h"

#include <limits.h>
#include <stdarg.h>
#include <time.h>

#define DEFAULT_MAX_TOKENS 16000
#define DEFAULT_TIMEOUT_MS (10 * 60 * 1000)
#define DEFAULT_MAX_ATTEMPTS 5
#define DEFAULT_BACKOFF_MS 1000
#define MAX_ATTEMPTS_LIMIT 20
#define MAX_KEY_LEN 4096
#define MAX_URL_LEN 2048
#define MAX_NAME_LEN 256

struct model {
        const struct model_provider *provider;
        char *name, *url, *models_url, *api_key;  /* api_key may be NULL */
        int max_tokens, timeout_ms, max_attempts, backoff_base_ms;
        model_usage_fn usage_fn;
        void *usage_userdata;
};

static bool printable_ascii(const char *s, bool allow_space) {
        for (const unsigned char *p = (const unsigned char *)s; *p; p++)
                if (*p > 0x7e || *p < 0x20 || (*p == ' ' && !allow_space))
                        return false;
        return true;
}

static int url_check(const char *url, const char *what, char **ret_error) {
        if (strempty(url) || strlen(url) > MAX_URL_LEN || !printable_ascii(url, false) ||
            (!startswith(url, "http://") && !startswith(url, "https://")) || strpbrk(url, "?#")) {
                (void)xasprintf(ret_error, "%s must be an http:// or https:// URL without query", what);
                return -EINVAL;
        }
        return 0;
}

static bool url_is_loopback(const char *url) {
        const char *host = strstr(url, "://");
        host = host ? host + 3 : url;
        return startswith(host, "127.") || startswith(host, "localhost:") || startswith(host, "localhost/") ||
               streq(host, "localhost") || startswith(host, "[::1]");
}

/* <base_url without trailing slashes><suffix> */
static int base_url_join(const char *base_url, const char *suffix, char **ret) {
        size_t len = strlen(base_url);
        while (len > 0 && base_url[len - 1] == '/')
                len--;
        return xasprintf(ret, "%.*s%s", (int)len, base_url, suffix);
}

/* The completions and models endpoints: the table's constants, or
 * openai-compatible's base_url. */
static int model_urls(const struct model_provider *p, const struct model_config *cfg, struct model *m,
                      char **ret_error) {
        if (p->endpoint) {
                m->url = strdup(p->endpoint);
                m->models_url = strdup(p->models_endpoint);
                return m->url && m->models_url ? 0 : -ENOMEM;
        }
        int r = url_check(cfg->base_url, "model.base_url", ret_error);
        if (r >= 0)
                r = base_url_join(cfg->base_url, "/chat/completions", &m->url);
        if (r >= 0)
                r = base_url_join(cfg->base_url, "/models", &m->models_url);
        return r;
}

int model_new(const struct model_config *cfg, struct model **ret, char **ret_error) {
        const struct model_provider *p = model_provider_find(cfg->provider);
        if (!p) {
                _cleanup_free_ char *names = model_provider_names(", ");
                (void)xasprintf(ret_error, "unknown model provider '%.40s' (%s)", cfg->provider ? cfg->provider : "",
                                names ? names : "?");
                return -EINVAL;
        }
        if (strempty(cfg->name) || strlen(cfg->name) > MAX_NAME_LEN || !printable_ascii(cfg->name, true)) {
                (void)xasprintf(ret_error, "model.name must be 1-%d printable characters", MAX_NAME_LEN);
                return -EINVAL;
        }
        const char *key = strempty(cfg->api_key) ? NULL : cfg->api_key;
        if (p->key_env && !key) {
                (void)xasprintf(ret_error, "model provider '%s' needs an API key", p->name);
                return -ENOKEY;
        }
        /* Never quote the key: say only what is wrong with it. */
        if (key && (strlen(key) > MAX_KEY_LEN || !printable_ascii(key, false))) {
                (void)xasprintf(ret_error, "the API key for '%s' contains spaces or control characters, or is "
                                           "too long", p->name);
                return -EINVAL;
        }
        if (cfg->max_tokens < 0 || cfg->timeout_ms < 0 || cfg->max_attempts < 0 || cfg->backoff_base_ms < 0) {
                (void)xasprintf(ret_error, "negative model limits");
                return -EINVAL;
        }
        struct model *m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        m->provider = p;
        m->max_tokens = cfg->max_tokens ? cfg->max_tokens : DEFAULT_MAX_TOKENS;
        m->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
        m->max_attempts = cfg->max_attempts ? cfg->max_attempts : DEFAULT_MAX_ATTEMPTS;
        if (m->max_attempts > MAX_ATTEMPTS_LIMIT)
                m->max_attempts = MAX_ATTEMPTS_LIMIT;
        m->backoff_base_ms = cfg->backoff_base_ms ? cfg->backoff_base_ms : DEFAULT_BACKOFF_MS;
        int r = model_urls(p, cfg, m, ret_error);
        if (r >= 0 && !(m->name = strdup(cfg->name)))
                r = -ENOMEM;
        if (r >= 0 && key && !(m->api_key = strdup(key)))
                r = -ENOMEM;
        if (r < 0) {
                model_free(m);
                return r;
        }
        if (key && startswith(m->url, "http://") && !url_is_loopback(m->url))
                log_warn("model.base_url is plain http: the API key travels unencrypted");
        *ret = m;
        return 0;
}

void model_free(struct model *m) {
        if (!m)
                return;
        if (m->api_key) {
                secure_zero(m->api_key, strlen(m->api_key));
                free(m->api_key);
        }
        free(m->name);
        free(m->url);
        free(m->models_url);
        free(m);
}

void model_set_usage_hook(struct model *m, model_usage_fn fn, void *userdata) {
        m->usage_fn = fn;
        m->usage_userdata = userdata;
}

const char *model_name(const struct model *m) { return m->name; }
const char *model_provider(const struct model *m) { return m->provider->name; }
const char *model_endpoint(const struct model *m) { return m->url; }
const char *model_models_endpoint(const struct model *m) { return m->models_url; }

int model_set_endpoint_for_tests(struct model *m, const char *url) {
        _cleanup_free_ char *err = NULL, *base = NULL, *models = NULL;
        int r = url_check(url, "endpoint", &err);
        if (r < 0)
                return r;
        /* The models list sits beside the completions endpoint. */
        size_t len = strlen(url);
        const char *suffix = endswith(url, "/chat/completions") ? "/chat/completions"
                             : endswith(url, "/messages")       ? "/messages"
                                                                : "";
        if (!(base = strndup(url, len - strlen(suffix))) || base_url_join(base, "/models", &models) < 0)
                return -ENOMEM;
        char *u = strdup(url);
        if (!u)
                return -ENOMEM;
        free(m->url);
        m->url = u;
        free(m->models_url);
        m->models_url = TAKE_PTR(models);
        return 0;
}

/* ---- one call, with retries ---- */

/* A reply without native calls whose text holds calls written as text
 * (model_text_calls_parse): they become its calls. */
static int calls_from_text(struct model_response *res) {
        if (res->message.n_calls > 0 || strempty(res->message.text))
                return 0;
        struct model_text_calls t = {0};
        _cleanup_free_ char *why = NULL;
        int r = model_text_calls_parse(res->message.text, &t, &why);
        if (r == -ENOMEM)
                return r;
        if (r == -EBADMSG) {
                res->unreadable_calls = TAKE_PTR(why);
                return res->unreadable_calls ? 0 : -ENOMEM;
        }
        if (r == 0)
                return 0;
        free(res->message.text);
        res->message.text = TAKE_PTR(t.rest);
        res->message.calls = TAKE_PTR(t.calls);
        res->message.n_calls = t.n;
        t.n = 0;
        res->calls_from_text = true;
        if (res->stop == MODEL_STOP_END)
                res->stop = MODEL_STOP_TOOL_CALLS;
        return 0;
}

/* The request's headers; the key lines are wiped by headers_free(). */
struct headers {
        char *lines[8];
        size_t n;
};

static void headers_free(struct headers *h) {
        for (size_t i = 0; i < h->n; i++) {
                secure_zero(h->lines[i], strlen(h->lines[i]));
                free(h->lines[i]);
        }
        h->n = 0;
}

/* Appends prefix + value as one header line. */
static int headers_add(struct headers *h, const char *prefix, const char *value) {
        if (h->n + 1 >= ARRAY_SIZE(h->lines))
                return -E2BIG;
        if (xasprintf(&h->lines[h->n], "%s%s", prefix, value ? value : "") < 0)
                return -ENOMEM;
        h->lines[++h->n] = NULL;
        return 0;
}

static int headers_build(const struct model *m, struct headers *h) {
        int r = headers_add(h, "Content-Type: application/json", NULL);
        if (r >= 0)
                r = headers_add(h, "Accept: application/json", NULL);
        if (r >= 0)
                r = headers_add(h, "Expect:", NULL); /* no 100-continue round trip */
        if (r >= 0)
                r = headers_add(h, "User-Agent: seed-kernel", NULL);
        if (r >= 0 && m->provider->format == MODEL_FORMAT_ANTHROPIC) {
                r = headers_add(h, "anthropic-version: 2023-06-01", NULL);
                if (r >= 0 && m->api_key)
                        r = headers_add(h, "x-api-key: ", m->api_key);
        } else if (r >= 0 && m->api_key)
                r = headers_add(h, "Authorization: Bearer ", m->api_key);
        return r;
}

/* What one failed attempt said. */
struct attempt {
        char *error;
        bool retry;
        int64_t delay_ms;  /* what the provider asked for, or -1 */
};

static int64_t retry_after(const struct httpc_response *res) {
        int64_t d = model_retry_after_ms(httpc_response_header(res, "retry-after-ms"), true);
        return d >= 0 ? d : model_retry_after_ms(httpc_response_header(res, "retry-after"), false);
}

/* What the owner can do about a refusal with this status (a sentence), or
 * NULL when there is nothing to say beyond the provider's words. */
static int refusal_fix(const struct model *m, long status, char **ret) {
        const char *env = m->provider->key_env;
        switch (status) {
        case 401:
        case 403:
                if (env)
                        return xasprintf(ret, "The provider refused the key: check %s (restart the Seed with -e %s, "
                                              "or lend a key in Settings > Mind).",
                                         env, env);
                return xasprintf(ret, "The server refused the key: check the variable model.api_key_env names in "
                                      "seed.yaml (restart the Seed with -e NAME, or lend a key in Settings > Mind).");
        case 402:
                return xasprintf(ret, "The provider's account cannot pay for this call: add credits, or choose "
                                      "another model in Settings > Mind.");
        case 404:
                return xasprintf(ret, "The provider has no model '%s' that can use tools: choose another in "
                                      "Settings > Mind, or set model.name in seed.yaml.",
                                 m->name);
        case 400:
        case 413:
        case 422:
                return xasprintf(ret, "The provider called the request invalid: check model.name and "
                                      "model.max_tokens in seed.yaml, or choose another model in Settings > Mind.");
        }
        *ret = NULL;
        return 0;
}

static int attempt_once(const struct model *m, const struct model_request *req, const char *body,
                        char *const *headers, int64_t left, struct model_response *ret, struct attempt *a) {
        struct httpc_response res = {0};
        _cleanup_free_ char *herr = NULL;
        int r = httpc_do(&(struct httpc_request){.method = "POST", .url = m->url, .headers = headers, .body = body,
                                                 .body_len = strlen(body),
                                                 .timeout_ms = left > INT_MAX ? INT_MAX : (int)left,
                                                 .max_response = MODEL_MAX_RESPONSE, .abort_fn = req->cancelled,
                                                 .abort_userdata = req->cancel_userdata},
                         &res, &herr);
        if (r < 0) {
                a->retry = httpc_error_is_network(r);
                if (r == -E2BIG) {
                        (void)xasprintf(&a->error, "response larger than %u MiB", MODEL_MAX_RESPONSE >> 20);
                        return -EBADMSG;
                }
                (void)xasprintf(&a->error, "%s", herr ? herr : "network error");
                return r;
        }
        if (res.status >= 200 && res.status <= 299) {
                r = model_wire_parse(m->provider->format, res.body, res.body_len, ret, &a->error);
                /* An error with a transient code, or a malformed or
                 * incomplete answer: the next attempt may be fine. */
                a->retry = r == -EAGAIN || r == -EBADMSG;
                if (r >= 0 && m->provider->text_tool_calls)
                        r = calls_from_text(ret);
        } else {
                _cleanup_free_ char *text = model_wire_error_text(res.body, res.body_len), *fix = NULL;
                a->retry = model_status_retryable(res.status);
                a->delay_ms = retry_after(&res);
                if (!a->retry && refusal_fix(m, res.status, &fix) < 0)
                        fix = NULL;
                (void)xasprintf(&a->error, "HTTP %ld: %s%s%s", res.status, text ? text : "", fix ? ". " : "",
                                fix ? fix : "");
                r = a->retry ? -EAGAIN : -EREMOTEIO;
        }
        httpc_response_done(&res);
        return r;
}

static bool is_cancelled(const struct model_request *req) {
        return req->cancelled && req->cancelled(req->cancel_userdata);
}

/* Sleeps ms, waking every 100 ms to check for cancellation. */
static int sleep_ms(int64_t ms, const struct model_request *req) {
        int64_t until = now_ms() + ms;
        for (;;) {
                if (is_cancelled(req))
                        return -ECANCELED;
                int64_t left = until - now_ms();
                if (left <= 0)
                        return 0;
                int64_t step = left > 100 ? 100 : left;
                struct timespec ts = {step / 1000, (long)(step % 1000) * 1000000L};
                nanosleep(&ts, NULL);
        }
}

static uint64_t jitter_random(void) {
        uint64_t v;
        if (crypto_random(&v, sizeof v) < 0)
                v = (uint64_t)now_ms() * 2654435761u;
        return v;
}

/* The caller's error: provider, what happened, redacted of the key. */
static int fail(const struct model *m, int r, char **ret_error, const char *fmt, ...) _printf_(4, 5);
static int fail(const struct model *m, int r, char **ret_error, const char *fmt, ...) {
        va_list ap;
        char *what = NULL, *full = NULL;
        va_start(ap, fmt);
        int k = xvasprintf(&what, fmt, ap);
        va_end(ap);
        if (k >= 0 && xasprintf(&full, "%s: %s", m->provider->name, what) >= 0 && ret_error)
                *ret_error = text_redact(full, m->api_key);
        free(what);
        if (full)
                secure_zero(full, strlen(full));
        free(full);
        return r;
}

int model_complete(struct model *m, const struct model_request *req, struct model_response *ret,
                   char **ret_error) {
        _cleanup_free_ char *body = NULL, *berr = NULL;
        const struct model_wire w = {
                .format = m->provider->format,
                .model = m->name,
                .max_tokens = req->max_tokens > 0 ? req->max_tokens : m->max_tokens,
                .usage_include = m->provider->usage_include,
                .max_completion_tokens = m->provider->max_completion_tokens,
                .cache_control = model_provider_caches(m->provider, m->name),
        };
        int r = model_wire_build(&w, req, &body, &berr);
        if (r < 0)
                return fail(m, r, ret_error, "cannot build the request: %s", berr ? berr : strerror(-r));

        struct headers h = {0};
        r = headers_build(m, &h);
        if (r < 0) {
                headers_free(&h);
                return fail(m, r, ret_error, "out of memory");
        }
        int64_t start = now_ms(), deadline = start + m->timeout_ms;
        struct attempt a = {0};
        int attempt = 0;
        for (;;) {
                free(a.error);
                a = (struct attempt){.delay_ms = -1};
                attempt++;
                if (is_cancelled(req)) {
                        r = -ECANCELED;
                        break;
                }
                int64_t left = deadline - now_ms();
                if (left <= 0) {
                        r = -ETIMEDOUT;
                        break;
                }
                struct model_response res = {0};
                r = attempt_once(m, req, body, h.lines, left, &res, &a);
                if (r < 0)
                        model_response_done(&res);
                if (r >= 0) {
                        headers_free(&h);
                        if (m->usage_fn)
                                m->usage_fn(m->usage_userdata, req->purpose, req->reference, m->name, &res.usage);
                        *ret = res;
                        return 0;
                }
                if (r == -ECANCELED || (r == -ETIMEDOUT && deadline - now_ms() < 100))
                        break;
                if (!a.retry || attempt >= m->max_attempts)
                        break;
                int64_t delay = a.delay_ms >= 0 ? a.delay_ms : model_backoff_ms(attempt, m->backoff_base_ms, jitter_random());
                if (now_ms() + delay >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                _cleanup_free_ char *safe = text_redact(a.error ? a.error : "", m->api_key);
                log_warn("model %s (%s): attempt %d of %d failed: %s; retrying in %lld ms", m->name,
                         m->provider->name, attempt, m->max_attempts, safe ? safe : "", (long long)delay);
                r = sleep_ms(delay, req);
                if (r < 0)
                        break;
        }
        headers_free(&h);
        _cleanup_free_ char *last = TAKE_PTR(a.error);
        const char *plural = attempt == 1 ? "" : "s";
        if (r == -ECANCELED)
                return fail(m, r, ret_error, "cancelled");
        if (r == -ETIMEDOUT)
                return fail(m, r, ret_error, "timed out after %lld ms (%d attempt%s)%s%s",
                            (long long)(now_ms() - start), attempt, plural, last ? "; last error: " : "",
                            last ? last : "");
        return fail(m, r, ret_error, "%s (%d attempt%s)", last ? last : strerror(-r), attempt, plural);
}

/* ---- the models a provider offers ---- */

int model_list(const struct model *m, struct model_list *ret, char **ret_error) {
        struct headers h = {0};
        int r = headers_build(m, &h);
        if (r < 0) {
                headers_free(&h);
                return fail(m, r, ret_error, "out of memory");
        }
        struct httpc_response res = {0};
        _cleanup_free_ char *herr = NULL;
        r = httpc_do(&(struct httpc_request){.method = "GET", .url = m->models_url, .headers = h.lines,
                                             .timeout_ms = m->timeout_ms < MODEL_LIST_TIMEOUT_MS ? m->timeout_ms
                                                                                                 : MODEL_LIST_TIMEOUT_MS,
                                             .max_response = MODEL_MAX_RESPONSE},
                     &res, &herr);
        headers_free(&h);
        if (r == -E2BIG)
                return fail(m, -EBADMSG, ret_error, "the list of models is larger than %u MiB", MODEL_MAX_RESPONSE >> 20);
        if (r < 0)
                return fail(m, r, ret_error, "cannot list the models: %s", herr ? herr : "network error");
        struct model_list all = {0};
        _cleanup_free_ char *perr = NULL;
        if (res.status < 200 || res.status > 299) {
                _cleanup_free_ char *text = model_wire_error_text(res.body, res.body_len);
                long status = res.status;
                httpc_response_done(&res);
                return fail(m, -EREMOTEIO, ret_error, "cannot list the models: HTTP %ld: %s", status, text ? text : "");
        }
        r = model_wire_parse_models(res.body, res.body_len, m->provider->tools_on_all, &all, &perr);
        httpc_response_done(&res);
        if (r < 0)
                return fail(m, r, ret_error, "cannot list the models: %s", perr ? perr : strerror(-r));
        /* Only the models that take tools, where the provider says so. */
        size_t kept = 0;
        for (size_t i = 0; i < all.n; i++) {
                if (all.models[i].tools == 0) {
                        free(all.models[i].id);
                        free(all.models[i].name);
                        continue;
                }
                all.models[kept++] = all.models[i];
        }
        all.n = kept;
        *ret = all;
        return 0;
}

void model_list_done(struct model_list *l) {
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++) {
                free(l->models[i].id);
                free(l->models[i].name);
        }
        free(l->models);
        *l = (struct model_list){0};
}

/* ---- conversation helpers ---- */

void model_message_done(struct model_message *msg) {
        if (!msg)
                return;
        for (size_t i = 0; i < msg->n_calls; i++) {
                free(msg->calls[i].id);
                free(msg->calls[i].name);
                free(msg->calls[i].arguments);
        }
        free(msg->calls);
        free(msg->text);
        free(msg->tool_call_id);
        for (size_t i = 0; i < msg->n_images; i++)
                free(msg->images[i].data);
        free(msg->images);
        *msg = (struct model_message){0};
}

void model_response_done(struct model_response *r) {
        if (!r)
                return;
        model_message_done(&r->message);
        free(r->unreadable_calls);
        *r = (struct model_response){0};
}

bool model_error_transient(int r) {
        return r == -EAGAIN || r == -EBADMSG || r == -ETIMEDOUT || httpc_error_is_network(r);
}

static int dup_opt(const char *s, char **ret) {
        *ret = NULL;
        return !s || (*ret = strdup(s)) ? 0 : -ENOMEM;
}

int model_message_copy(const struct model_message *from, struct model_message *to) {
        struct model_message c = {.role = from->role, .is_error = from->is_error};
        int r = dup_opt(from->text, &c.text);
        if (r >= 0)
                r = dup_opt(from->tool_call_id, &c.tool_call_id);
        if (r >= 0 && from->n_calls > 0 && !(c.calls = calloc(from->n_calls, sizeof *c.calls)))
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < from->n_calls; i++) {
                c.n_calls++;
                r = dup_opt(from->calls[i].id, &c.calls[i].id);
                if (r >= 0)
                        r = dup_opt(from->calls[i].name, &c.calls[i].name);
                if (r >= 0)
                        r = dup_opt(from->calls[i].arguments, &c.calls[i].arguments);
        }
        if (r >= 0 && from->n_images > 0 && !(c.images = calloc(from->n_images, sizeof *c.images)))
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < from->n_images; i++) {
                c.images[i] = (struct model_image){.media_type = from->images[i].media_type,
                                                   .data = malloc(from->images[i].len ? from->images[i].len : 1),
                                                   .len = from->images[i].len};
                c.n_images++;
                if (!c.images[i].data)
                        r = -ENOMEM;
                else
                        memcpy(c.images[i].data, from->images[i].data, from->images[i].len);
        }
        if (r < 0) {
                model_message_done(&c);
                return r;
        }
        *to = c;
        return 0;
}
