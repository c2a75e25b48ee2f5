/* config.c — seed.yaml, parsed with libyaml (the only libyaml user), and
 * the flat mappings of scalars of knowledge/self.yaml and SKILL.md front
 * matter with the same reader (cfg_scalars_parse, at the end).
 *
 * Two passes over the text: the event parser first checks what the document
 * API would hide (syntax, anchors/aliases, tags, nesting depth, document
 * count), then the document API loads the one document and the schema tables
 * below walk its nodes. Every node keeps its start mark, so every error names
 * file:line:column (1-based) of the offending key or value.
 *
 * The schema is data: one table per section, each field with its kind, its
 * place in struct cfg, its default and its check. Defaults, parsing, freeing
 * and comparing all walk the same tables. */
#include "config/config.h"

#include "base/fileio.h"
#include "base/text.h"
#include "egress/egress.h"
#include "model/providers.h"
#include "spend/prices.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <yaml.h>

#define CFG_MAX_BYTES (1024 * 1024)
#define CFG_MAX_DEPTH 16
#define CFG_MAX_SCALAR 4096
#define CFG_MAX_LIST 64
#define ESC_MAX 64

struct ctx {
        const char *filename;
        yaml_document_t *doc;
        struct cfg *cfg;
        char *error; /* first error, "file:line:col: message" */
};

enum kind { K_SECTION, K_STRING, K_INT, K_BOOL, K_DECISION, K_LIST };

/* Validates (and may normalise in place) one string or list entry. */
typedef int (*check_fn)(struct ctx *x, const char *path, yaml_node_t *n, char *v);

struct field {
        const char *key;
        enum kind kind;
        size_t off;                       /* into struct cfg */
        const struct field *sub;          /* K_SECTION: ends with a NULL key */
        int (*finish)(struct ctx *x, yaml_node_t *section); /* K_SECTION */
        check_fn check;                   /* K_STRING, K_LIST entries */
        long min, max;                    /* K_INT */
        const char *def;                  /* K_STRING */
        const char *const *def_list;      /* K_LIST, NULL-terminated */
        int def_int;                      /* K_INT, K_BOOL, K_DECISION */
        bool secret;                      /* never echo the value in errors */
};

#define AT(c, f, T) ((T *)((char *)(c) + (f)->off))

/* ---- error messages ---------------------------------------------------- */

static int _printf_(3, 4) fail_at(struct ctx *x, yaml_mark_t m, const char *fmt, ...) {
        if (x->error)
                return -EINVAL;
        va_list ap;
        char *msg = NULL;
        va_start(ap, fmt);
        int k = xvasprintf(&msg, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        if (xasprintf(&x->error, "%s:%zu:%zu: %s", x->filename, m.line + 1, m.column + 1, msg) < 0) {
                free(msg);
                return -ENOMEM;
        }
        free(msg);
        return -EINVAL;
}

#define fail(x, node, ...) fail_at((x), (node)->start_mark, __VA_ARGS__)

static yaml_mark_t mark_1_1(void) {
        return (yaml_mark_t){0};
}

/* Copies len bytes of s for an error message: printable ASCII as is, anything
 * else as \xNN, clipped with "...". Returns out. */
static const char *esc(char out[static ESC_MAX], const char *s, size_t len) {
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = (unsigned char)s[i];
                if (o + 4 + 3 + 1 > ESC_MAX) {
                        memcpy(out + o, "...", 3);
                        o += 3;
                        break;
                }
                if (ch >= 0x20 && ch < 0x7f && ch != '\\')
                        out[o++] = (char)ch;
                else
                        o += (size_t)snprintf(out + o, ESC_MAX - o, "\\x%02x", ch);
        }
        out[o] = 0;
        return out;
}

/* ---- node helpers ------------------------------------------------------ */

static const char *sval(yaml_node_t *n) {
        return (const char *)n->data.scalar.value;
}

static size_t slen(yaml_node_t *n) {
        return n->data.scalar.length;
}

static bool scalar_is(yaml_node_t *n, const char *s) {
        return slen(n) == strlen(s) && memcmp(sval(n), s, slen(n)) == 0;
}

static bool is_plain(yaml_node_t *n) {
        return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static bool is_null(yaml_node_t *n) {
        return is_plain(n) && (slen(n) == 0 || scalar_is(n, "~") || scalar_is(n, "null") ||
                               scalar_is(n, "Null") || scalar_is(n, "NULL"));
}

static bool is_bool(yaml_node_t *n) {
        static const char *const words[] = {"true", "false", "True", "False", "TRUE", "FALSE"};
        if (!is_plain(n))
                return false;
        for (size_t i = 0; i < ARRAY_SIZE(words); i++)
                if (scalar_is(n, words[i]))
                        return true;
        return false;
}

/* Plain decimal: -?(0|[1-9][0-9]*). */
static bool is_decimal(const char *s, size_t len) {
        size_t i = 0;
        if (i < len && s[i] == '-')
                i++;
        if (i == len || (s[i] == '0' && len - i > 1))
                return false;
        for (; i < len; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

static const char *node_kind(yaml_node_t *n) {
        switch (n->type) {
        case YAML_MAPPING_NODE:
                return "a mapping";
        case YAML_SEQUENCE_NODE:
                return "a sequence";
        case YAML_SCALAR_NODE:
                if (is_null(n))
                        return "null";
                if (is_bool(n))
                        return "a boolean";
                if (is_plain(n) && is_decimal(sval(n), slen(n)))
                        return "an integer";
                return "a string";
        default:
                return "nothing";
        }
}

static yaml_node_t *node(struct ctx *x, int index) {
        return yaml_document_get_node(x->doc, index);
}

/* The value node of key in a mapping node, or NULL. */
static yaml_node_t *find_value(struct ctx *x, yaml_node_t *map, const char *key) {
        if (!map || map->type != YAML_MAPPING_NODE)
                return NULL;
        for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
                yaml_node_t *k = node(x, p->key);
                if (k && k->type == YAML_SCALAR_NODE && scalar_is(k, key))
                        return node(x, p->value);
        }
        return NULL;
}

/* ---- checks ------------------------------------------------------------ */

static bool has_control(const char *v) {
        for (const unsigned char *p = (const unsigned char *)v; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return true;
        return false;
}

static bool has_space_or_control(const char *v) {
        for (const unsigned char *p = (const unsigned char *)v; *p; p++)
                if (*p <= 0x20 || *p == 0x7f)
                        return true;
        return false;
}

/* A DNS name or dotted IPv4: labels of [A-Za-z0-9-], 1..63, not starting or
 * ending with '-'; at most 253 in all; no trailing dot. */
static bool is_hostname(const char *s, size_t len) {
        if (len == 0 || len > 253)
                return false;
        size_t label = 0;
        for (size_t i = 0; i < len; i++) {
                char ch = s[i];
                if (ch == '.') {
                        if (label == 0 || s[i - 1] == '-')
                                return false;
                        label = 0;
                        continue;
                }
                if (!isascii((unsigned char)ch) || !(isalnum((unsigned char)ch) || ch == '-'))
                        return false;
                if (ch == '-' && label == 0)
                        return false;
                if (++label > 63)
                        return false;
        }
        return label > 0 && s[len - 1] != '-';
}

static int check_name(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        size_t len = strlen(v);
        bool ok = len >= 1 && len <= 41 && v[0] >= 'a' && v[0] <= 'z';
        for (size_t i = 1; ok && i < len; i++)
                ok = (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '-';
        if (ok)
                return 0;
        char e[ESC_MAX];
        return fail(x, n, "%s: '%s' does not match ^[a-z][a-z0-9-]{0,40}$", path, esc(e, v, len));
}

/* Splits addr; on failure *ret_why says why (static text). */
static int split_addr(const char *addr, char **ret_host, int *ret_port, const char **ret_why) {
        const char *host, *port;
        size_t host_len;
        if (addr[0] == '[') {
                const char *close = strchr(addr, ']');
                if (!close) {
                        *ret_why = "'[' without ']'";
                        return -EINVAL;
                }
                host = addr + 1;
                host_len = (size_t)(close - host);
                char tmp[INET6_ADDRSTRLEN];
                struct in6_addr a6;
                if (host_len == 0 || host_len >= sizeof(tmp)) {
                        *ret_why = "not an IPv6 address in brackets";
                        return -EINVAL;
                }
                memcpy(tmp, host, host_len);
                tmp[host_len] = 0;
                if (inet_pton(AF_INET6, tmp, &a6) != 1) {
                        *ret_why = "not an IPv6 address in brackets";
                        return -EINVAL;
                }
                if (close[1] != ':') {
                        *ret_why = close[1] ? "expected ':' after ']'" : "missing port (expected HOST:PORT or [IPv6]:PORT)";
                        return -EINVAL;
                }
                port = close + 2;
        } else {
                const char *colon = strchr(addr, ':');
                if (!colon) {
                        *ret_why = "missing port (expected HOST:PORT or [IPv6]:PORT)";
                        return -EINVAL;
                }
                if (strchr(colon + 1, ':')) {
                        *ret_why = "an IPv6 address needs brackets, like [::1]:8080";
                        return -EINVAL;
                }
                host = addr;
                host_len = (size_t)(colon - addr);
                if (host_len == 0) {
                        *ret_why = "missing host (expected HOST:PORT or [IPv6]:PORT)";
                        return -EINVAL;
                }
                if (!is_hostname(host, host_len)) {
                        *ret_why = "the host is not a host name or IPv4 address";
                        return -EINVAL;
                }
                port = colon + 1;
        }
        size_t plen = strlen(port);
        if (plen == 0) {
                *ret_why = "missing port (expected HOST:PORT or [IPv6]:PORT)";
                return -EINVAL;
        }
        if (plen > 5 || !is_decimal(port, plen) || port[0] == '-') {
                *ret_why = "the port must be a decimal number from 1 to 65535";
                return -EINVAL;
        }
        int p = atoi(port);
        if (p < 1 || p > 65535) {
                *ret_why = "the port is out of range (1-65535)";
                return -EINVAL;
        }
        char *h = strndup(host, host_len);
        if (!h)
                return -ENOMEM;
        *ret_host = h;
        *ret_port = p;
        return 0;
}

int cfg_split_addr(const char *addr, char **ret_host, int *ret_port) {
        const char *why = NULL;
        if (!addr)
                return -EINVAL;
        return split_addr(addr, ret_host, ret_port, &why);
}

static int check_addr(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        _cleanup_free_ char *host = NULL;
        const char *why = NULL;
        int port;
        int r = split_addr(v, &host, &port, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                char e[ESC_MAX];
                return fail(x, n, "%s: '%s': %s", path, esc(e, v, strlen(v)), why);
        }
        return 0;
}

static int check_host(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        if (!is_hostname(v, strlen(v))) {
                char e[ESC_MAX];
                return fail(x, n, "%s: '%s' is not a plain host name (no scheme, port, path or wildcard)",
                            path, esc(e, v, strlen(v)));
        }
        for (char *p = v; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        return 0;
}

/* server.control_host: "" (the same-origin fallback) or a plain host name. */
static int check_control_host(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        return *v ? check_host(x, path, n, v) : 0;
}

/* model.provider: a row of kernel/model's providers table. */
static int check_provider(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        if (model_provider_find(v))
                return 0;
        char e[ESC_MAX];
        _cleanup_free_ char *names = model_provider_names(" or ");
        if (!names)
                return -ENOMEM;
        return fail(x, n, "%s: unknown provider '%s' (expected %s)", path, esc(e, v, strlen(v)), names);
}

static int check_model_name(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        if (!*v)
                return fail(x, n, "%s: must not be empty", path);
        if (strlen(v) > 256 || has_space_or_control(v)) {
                char e[ESC_MAX];
                return fail(x, n, "%s: '%s' is not a model name (at most 256 characters, no spaces)",
                            path, esc(e, v, strlen(v)));
        }
        return 0;
}

static int check_base_url(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        if (!*v)
                return 0;
        char e[ESC_MAX];
        const char *rest = startswith(v, "https://") ? v + 8 : startswith(v, "http://") ? v + 7 : NULL;
        if (!rest || strlen(v) > 2048 || has_space_or_control(v))
                return fail(x, n, "%s: '%s' is not an http:// or https:// URL", path, esc(e, v, strlen(v)));
        size_t auth = strcspn(rest, "/?#");
        if (auth == 0)
                return fail(x, n, "%s: '%s' has no host", path, esc(e, v, strlen(v)));
        /* Never echo a URL that carries credentials. */
        if (memchr(rest, '@', auth))
                return fail(x, n, "%s: must not contain credentials (keys come from the environment)", path);
        return 0;
}

static int check_env_name(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        if (!*v)
                return 0;
        size_t len = strlen(v);
        bool ok = len <= 128 && (isalpha((unsigned char)v[0]) || v[0] == '_');
        for (size_t i = 0; ok && i < len; i++)
                ok = isascii((unsigned char)v[i]) && (isalnum((unsigned char)v[i]) || v[i] == '_');
        char e[ESC_MAX];
        if (!ok)
                return fail(x, n, "%s: '%s' is not an environment variable name", path, esc(e, v, len));
        if (startswith(v, "SEED_"))
                return fail(x, n, "%s: '%s': SEED_* variables are the kernel's own and are never sent to a model",
                            path, esc(e, v, len));
        return 0;
}

static int check_db_url(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        /* May hold a password: never echoed, and refused (seed.yaml is in git). */
        if (has_control(v))
                return fail(x, n, "%s: must not contain control characters", path);
        const char *scheme = strstr(v, "://");
        bool url_password = false;
        if (scheme) {
                const char *auth = scheme + 3;
                size_t len = strcspn(auth, "/?#");
                const char *at = memchr(auth, '@', len);
                url_password = at && memchr(auth, ':', (size_t)(at - auth));
        }
        if (url_password || strcasestr(v, "password="))
                return fail(x, n, "%s: must not contain a password (seed.yaml is committed to git); pass it at "
                            "every start instead: seed run -e SEED_DATABASE_PASSWORD", path);
        return 0;
}

static int check_driver(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        if (streq(v, "bwrap"))
                return 0;
        char e[ESC_MAX];
        return fail(x, n, "%s: '%s' is not supported: the only driver is bwrap (there is no unsandboxed mode)",
                    path, esc(e, v, strlen(v)));
}

static int check_command(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        bool blank = true;
        for (const char *p = v; *p; p++)
                if (!isspace((unsigned char)*p))
                        blank = false;
        if (blank)
                return fail(x, n, "%s: must not be empty", path);
        return 0;
}

static int check_health(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        if (v[0] != '/' || strlen(v) > 1024 || has_space_or_control(v)) {
                char e[ESC_MAX];
                return fail(x, n, "%s: '%s' must be a URL path starting with '/'", path, esc(e, v, strlen(v)));
        }
        return 0;
}

/* A relative path inside the repository: no '/' at the start, no empty, '.'
 * or hidden component (.git, .seed), no '..' anywhere, and only letters,
 * digits, '.', '_', '-' and '/'. NULL if fine, else why. */
static const char *relpath_problem(const char *v) {
        if (!*v)
                return "must not be empty";
        if (v[0] == '/')
                return "must be relative to the Seed's folder, not absolute";
        if (strlen(v) > 255)
                return "is longer than 255 characters";
        for (const char *p = v; *p; p++)
                if (!(isascii((unsigned char)*p) && (isalnum((unsigned char)*p) || strchr("._-/", *p))))
                        return "may hold only letters, digits, '.', '_', '-' and '/'";
        if (strstr(v, ".."))
                return "must not contain '..'";
        for (const char *c = v; *c;) {
                size_t len = strcspn(c, "/");
                if (len == 0)
                        return "has an empty path component";
                if (c[0] == '.')
                        return "must not contain '.' or hidden components";
                c += len;
                if (*c == '/')
                        c++;
        }
        return NULL;
}

static int check_relpath(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        const char *why = relpath_problem(v);
        if (!why)
                return 0;
        char e[ESC_MAX];
        return fail(x, n, "%s: '%s' %s", path, esc(e, v, strlen(v)), why);
}

/* egress.registries: a host pattern the egress proxy may allow (no scheme,
 * port, path, IP literal or internal name), kept lowercased without a
 * trailing dot. */
static int check_registry(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        _cleanup_free_ char *why = NULL;
        size_t len = strlen(v);
        if (len > 0 && v[len - 1] == '.')
                v[--len] = 0;
        for (char *p = v; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        int r = egress_pattern_check(v, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                char e[ESC_MAX];
                return fail(x, n, "%s: '%s' is not a host pattern the proxy can allow (%s); write a host name "
                                  "(registry.example.com) or *.example.com for its subdomains",
                            path, esc(e, v, len), why ? why : "malformed");
        }
        return 0;
}

/* spend.prices: "PREFIX INPUT OUTPUT" (kernel/spend's parser). */
static int check_price(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        struct spend_price p;
        const char *why = NULL;
        if (spend_price_parse(v, &p, &why) < 0) {
                char e[ESC_MAX];
                return fail(x, n, "%s: '%s': %s", path, esc(e, v, strlen(v)), why ? why : "malformed");
        }
        return 0;
}

static int check_evolvable(struct ctx *x, const char *path, yaml_node_t *n, char *v) {
        int r = check_relpath(x, path, n, v);
        if (r < 0)
                return r;
        if (!endswith(v, "/")) {
                char e[ESC_MAX];
                return fail(x, n, "%s: '%s' must end with '/' (evolvable entries are directories)",
                            path, esc(e, v, strlen(v)));
        }
        return 0;
}

/* ---- the schema -------------------------------------------------------- */

static int finish_model(struct ctx *x, yaml_node_t *section);
static int finish_server(struct ctx *x, yaml_node_t *section);

#define STR(k, member, d, fn) \
        {.key = k, .kind = K_STRING, .off = offsetof(struct cfg, member), .def = d, .check = fn}
#define INT(k, member, d, lo, hi) \
        {.key = k, .kind = K_INT, .off = offsetof(struct cfg, member), .def_int = d, .min = lo, .max = hi}
#define BOOL(k, member, d) \
        {.key = k, .kind = K_BOOL, .off = offsetof(struct cfg, member), .def_int = d}
#define DECISION(k, member, d) \
        {.key = k, .kind = K_DECISION, .off = offsetof(struct cfg, member), .def_int = d}
#define LIST(k, member, d, fn) \
        {.key = k, .kind = K_LIST, .off = offsetof(struct cfg, member), .def_list = d, .check = fn}
#define SECTION(k, fields, fin) {.key = k, .kind = K_SECTION, .sub = fields, .finish = fin}

static const char *const no_hosts[] = {NULL};
static const char *const no_prices[] = {NULL};
static const char *const default_evolvable[] = {"organism/", "knowledge/", "skills/", NULL};

static const struct field server_fields[] = {
        STR("addr", server.addr, "127.0.0.1:8080", check_addr),
        LIST("allowed_hosts", server.allowed_hosts, no_hosts, check_host),
        STR("control_host", server.control_host, "seed.localhost", check_control_host),
        INT("ask_draft_seconds", server.ask_draft_seconds, 1800, 1, 1800),
        {0},
};

static const struct field model_fields[] = {
        STR("provider", model.provider, "openrouter", check_provider),
        STR("name", model.name, "anthropic/claude-sonnet-4.5", check_model_name),
        STR("base_url", model.base_url, "", check_base_url),
        STR("api_key_env", model.api_key_env, "", check_env_name),
        INT("max_tokens", model.max_tokens, 16000, 1, 1000000),
        INT("context_chars", model.context_chars, CFG_CONTEXT_CHARS_DEFAULT, CFG_CONTEXT_CHARS_MIN,
            CFG_CONTEXT_CHARS_MAX),
        {0},
};

static const struct field database_fields[] = {
        {.key = "url", .kind = K_STRING, .off = offsetof(struct cfg, database.url), .def = "",
         .check = check_db_url, .secret = true},
        {0},
};

static const struct field sandbox_fields[] = {
        STR("driver", sandbox.driver, "bwrap", check_driver),
        {0},
};

static const struct field organism_fields[] = {
        STR("build", organism.build, "make -C organism build", check_command),
        STR("test", organism.test, "make -C organism test", check_command),
        STR("run", organism.run, "organism/bin/server", check_command),
        INT("port", organism.port, 8080, 1, 65535),
        STR("health", organism.health, "/healthz", check_health),
        STR("migrations", organism.migrations, "organism/migrations", check_relpath),
        {0},
};

static const struct field evolution_fields[] = {
        INT("max_repair_attempts", evolution.max_repair_attempts, 3, 0, 20),
        INT("max_agent_turns", evolution.max_agent_turns, 150, 1, 1000),
        INT("command_timeout_seconds", evolution.command_timeout_seconds, 900, 1, 86400),
        INT("model_wait_seconds", evolution.model_wait_seconds, 900, 0, 86400),
        INT("preview_wait_seconds", evolution.preview_wait_seconds, 43200, 1, 43200),
        {0},
};

static const struct field permissions_fields[] = {
        DECISION("safe", permissions.safe, CFG_ALLOW),
        DECISION("review", permissions.review, CFG_ALLOW),
        DECISION("dangerous", permissions.dangerous, CFG_ASK),
        BOOL("require_plan_approval", permissions.require_plan_approval, false),
        BOOL("require_apply_approval", permissions.require_apply_approval, false),
        {0},
};

static const struct field kernel_fields[] = {
        LIST("evolvable", kernel.evolvable, default_evolvable, check_evolvable),
        {0},
};

static const struct field egress_fields[] = {
        LIST("registries", egress.registries, no_hosts, check_registry),
        {0},
};

static const struct field spend_fields[] = {
        LIST("prices", spend.prices, no_prices, check_price),
        {0},
};

static const struct field root_fields[] = {
        STR("name", name, "seed", check_name),
        SECTION("server", server_fields, finish_server),
        SECTION("model", model_fields, finish_model),
        SECTION("database", database_fields, NULL),
        SECTION("sandbox", sandbox_fields, NULL),
        SECTION("organism", organism_fields, NULL),
        SECTION("evolution", evolution_fields, NULL),
        SECTION("permissions", permissions_fields, NULL),
        SECTION("kernel", kernel_fields, NULL),
        SECTION("egress", egress_fields, NULL),
        SECTION("spend", spend_fields, NULL),
        {0},
};

static const struct field root = SECTION(NULL, root_fields, NULL);

static bool ends_with_label(const char *name, const char *suffix) {
        size_t n = strlen(name), sl = strlen(suffix);
        return n > sl + 1 && name[n - sl - 1] == '.' && streq(name + n - sl, suffix);
}

/* The control plane's own host must be one the kernel answers to, and not
 * the organism's admin origin. */
static int finish_server(struct ctx *x, yaml_node_t *section) {
        const char *h = x->cfg->server.control_host;
        bool allowed = ends_with_label(h, "localhost");
        for (char **a = x->cfg->server.allowed_hosts; !allowed && *a; a++)
                allowed = streq(*a, h);
        if (!*h || (allowed && !streq(h, "organism.localhost") && !ends_with_label(h, "organism.localhost")))
                return 0;
        yaml_node_t *at = section ? find_value(x, section, "control_host") : NULL;
        if (!allowed)
                return fail(x, at ? at : section,
                            "server.control_host: '%s' must be a *.localhost name or one of "
                            "server.allowed_hosts (or \"\" for the same-origin layout)", h);
        return fail(x, at ? at : section,
                    "server.control_host: '%s' is the organism's admin origin, never the control plane's", h);
}

static int finish_model(struct ctx *x, yaml_node_t *section) {
        const struct cfg *c = x->cfg;
        const struct model_provider *p = model_provider_find(c->model.provider);
        bool compat = p && !p->endpoint; /* its endpoint and key variable come from here */
        yaml_node_t *at;
        if (compat && !*c->model.base_url) {
                at = find_value(x, section, "provider");
                return fail(x, at ? at : section, "model: provider '%s' needs base_url", c->model.provider);
        }
        if (!compat && *c->model.base_url) {
                at = find_value(x, section, "base_url");
                return fail(x, at ? at : section,
                            "model.base_url: the endpoint of provider '%s' is fixed in code; "
                            "base_url is only for openai-compatible", c->model.provider);
        }
        if (!compat && *c->model.api_key_env) {
                at = find_value(x, section, "api_key_env");
                return fail(x, at ? at : section,
                            "model.api_key_env: provider '%s' reads its key from a fixed variable; "
                            "api_key_env is only for openai-compatible", c->model.provider);
        }
        return 0;
}

/* ---- defaults, free, compare ------------------------------------------- */

static char **strv_from(const char *const *list) {
        char **v = calloc(1, sizeof(char *));
        if (!v)
                return NULL;
        for (; *list; list++)
                if (strv_push(&v, *list) < 0) {
                        strv_free(v);
                        return NULL;
                }
        return v;
}

static int set_defaults(struct cfg *c, const struct field *fields) {
        for (const struct field *f = fields; f->key; f++) {
                int r = 0;
                switch (f->kind) {
                case K_SECTION:
                        r = set_defaults(c, f->sub);
                        break;
                case K_STRING:
                        if (!(*AT(c, f, char *) = strdup(f->def)))
                                r = -ENOMEM;
                        break;
                case K_LIST:
                        if (!(*AT(c, f, char **) = strv_from(f->def_list)))
                                r = -ENOMEM;
                        break;
                case K_INT:
                        *AT(c, f, int) = f->def_int;
                        break;
                case K_BOOL:
                        *AT(c, f, bool) = f->def_int;
                        break;
                case K_DECISION:
                        *AT(c, f, enum cfg_decision) = (enum cfg_decision)f->def_int;
                        break;
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

static void free_fields(struct cfg *c, const struct field *fields) {
        for (const struct field *f = fields; f->key; f++) {
                if (f->kind == K_SECTION)
                        free_fields(c, f->sub);
                else if (f->kind == K_STRING)
                        free(*AT(c, f, char *));
                else if (f->kind == K_LIST)
                        strv_free(*AT(c, f, char **));
        }
}

void cfg_free(struct cfg *c) {
        if (!c)
                return;
        free_fields(c, root_fields);
        free(c);
}

int cfg_new_default(struct cfg **ret) {
        _cleanup_(cfg_freep) struct cfg *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        int r = set_defaults(c, root_fields);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

static bool fields_equal(const struct cfg *a, const struct cfg *b, const struct field *fields) {
        for (const struct field *f = fields; f->key; f++) {
                bool eq = true;
                switch (f->kind) {
                case K_SECTION:
                        eq = fields_equal(a, b, f->sub);
                        break;
                case K_STRING:
                        eq = streq(*AT(a, f, char *), *AT(b, f, char *));
                        break;
                case K_LIST: {
                        char **va = *AT(a, f, char **), **vb = *AT(b, f, char **);
                        size_t i = 0;
                        for (; va[i] && vb[i]; i++)
                                if (!streq(va[i], vb[i]))
                                        return false;
                        eq = !va[i] && !vb[i];
                        break;
                }
                case K_INT:
                        eq = *AT(a, f, int) == *AT(b, f, int);
                        break;
                case K_BOOL:
                        eq = *AT(a, f, bool) == *AT(b, f, bool);
                        break;
                case K_DECISION:
                        eq = *AT(a, f, enum cfg_decision) == *AT(b, f, enum cfg_decision);
                        break;
                }
                if (!eq)
                        return false;
        }
        return true;
}

bool cfg_equal(const struct cfg *a, const struct cfg *b) {
        if (!a || !b)
                return a == b;
        return fields_equal(a, b, root_fields);
}

const char *cfg_decision_name(enum cfg_decision d) {
        switch (d) {
        case CFG_ALLOW:
                return "allow";
        case CFG_ASK:
                return "ask";
        case CFG_DENY:
                return "deny";
        }
        return "unknown";
}

/* ---- the walk ---------------------------------------------------------- */

/* A string value as a fresh C string: a scalar that is not null or a
 * boolean, at most CFG_MAX_SCALAR bytes, without NUL bytes. */
static int take_string(struct ctx *x, const char *path, yaml_node_t *n, char **ret) {
        if (n->type != YAML_SCALAR_NODE || is_null(n) || is_bool(n))
                return fail(x, n, "%s: expected a string, got %s", path, node_kind(n));
        if (slen(n) > CFG_MAX_SCALAR)
                return fail(x, n, "%s: longer than %d bytes", path, CFG_MAX_SCALAR);
        if (memchr(sval(n), 0, slen(n)))
                return fail(x, n, "%s: contains a NUL character", path);
        char *s = strndup(sval(n), slen(n));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static int set_string(struct ctx *x, const struct field *f, const char *path, yaml_node_t *n) {
        _cleanup_free_ char *v = NULL;
        int r = take_string(x, path, n, &v);
        if (r < 0)
                return r;
        if (f->check && (r = f->check(x, path, n, v)) < 0)
                return r;
        char **slot = AT(x->cfg, f, char *);
        free(*slot);
        *slot = TAKE_PTR(v);
        return 0;
}

static int set_int(struct ctx *x, const struct field *f, const char *path, yaml_node_t *n) {
        char e[ESC_MAX];
        if (!is_plain(n) || is_null(n) || is_bool(n))
                return fail(x, n, "%s: expected an integer, got %s", path, node_kind(n));
        if (!is_decimal(sval(n), slen(n)))
                return fail(x, n, "%s: expected a plain decimal integer, got '%s'", path,
                            esc(e, sval(n), slen(n)));
        long v = slen(n) <= 12 ? strtol(sval(n), NULL, 10) : f->max + 1;
        if (v < f->min || v > f->max)
                return fail(x, n, "%s: %s is out of range (%ld-%ld)", path, esc(e, sval(n), slen(n)),
                            f->min, f->max);
        *AT(x->cfg, f, int) = (int)v;
        return 0;
}

static int set_bool(struct ctx *x, const struct field *f, const char *path, yaml_node_t *n) {
        char e[ESC_MAX];
        if (is_plain(n) && (scalar_is(n, "true") || scalar_is(n, "false"))) {
                *AT(x->cfg, f, bool) = scalar_is(n, "true");
                return 0;
        }
        if (n->type == YAML_SCALAR_NODE && !is_null(n))
                return fail(x, n, "%s: expected true or false, got '%s'", path, esc(e, sval(n), slen(n)));
        return fail(x, n, "%s: expected true or false, got %s", path, node_kind(n));
}

static int set_decision(struct ctx *x, const struct field *f, const char *path, yaml_node_t *n) {
        static const enum cfg_decision all[] = {CFG_ALLOW, CFG_ASK, CFG_DENY};
        char e[ESC_MAX];
        if (n->type != YAML_SCALAR_NODE || is_null(n))
                return fail(x, n, "%s: expected allow, ask or deny, got %s", path, node_kind(n));
        for (size_t i = 0; i < ARRAY_SIZE(all); i++)
                if (scalar_is(n, cfg_decision_name(all[i]))) {
                        *AT(x->cfg, f, enum cfg_decision) = all[i];
                        return 0;
                }
        return fail(x, n, "%s: '%s' is not one of allow, ask, deny", path, esc(e, sval(n), slen(n)));
}

static int set_list(struct ctx *x, const struct field *f, const char *path, yaml_node_t *n) {
        if (n->type != YAML_SEQUENCE_NODE)
                return fail(x, n, "%s: expected a sequence, got %s", path, node_kind(n));
        yaml_node_item_t *items = n->data.sequence.items.start;
        size_t count = (size_t)(n->data.sequence.items.top - items);
        if (count > CFG_MAX_LIST)
                return fail(x, n, "%s: more than %d entries", path, CFG_MAX_LIST);
        _cleanup_strv_free_ char **v = calloc(count + 1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < count; i++) {
                yaml_node_t *item = node(x, items[i]);
                char ipath[128];
                snprintf(ipath, sizeof(ipath), "%s[%zu]", path, i);
                if (!item)
                        return fail(x, n, "%s: missing entry", ipath);
                int r = take_string(x, ipath, item, &v[i]);
                if (r < 0)
                        return r;
                if (f->check && (r = f->check(x, ipath, item, v[i])) < 0)
                        return r;
                for (size_t j = 0; j < i; j++)
                        if (streq(v[j], v[i])) {
                                char e[ESC_MAX];
                                return fail(x, item, "%s: duplicate entry '%s'", ipath,
                                            esc(e, v[i], strlen(v[i])));
                        }
        }
        char ***slot = AT(x->cfg, f, char **);
        strv_free(*slot);
        *slot = TAKE_PTR(v);
        return 0;
}

static const struct field *find_field(const struct field *fields, yaml_node_t *key) {
        for (const struct field *f = fields; f->key; f++)
                if (scalar_is(key, f->key))
                        return f;
        return NULL;
}

static int walk_section(struct ctx *x, const struct field *sec, const char *path, yaml_node_t *n) {
        char e[ESC_MAX];
        /* An empty section ("server:" with every key commented out) keeps the defaults. */
        if (is_null(n))
                return 0;
        if (n->type != YAML_MAPPING_NODE) {
                if (!path)
                        return fail(x, n, "expected a mapping at the top level, got %s", node_kind(n));
                return fail(x, n, "%s: expected a mapping, got %s", path, node_kind(n));
        }
        yaml_node_pair_t *pairs = n->data.mapping.pairs.start;
        size_t count = (size_t)(n->data.mapping.pairs.top - pairs);
        for (size_t i = 0; i < count; i++) {
                yaml_node_t *k = node(x, pairs[i].key), *v = node(x, pairs[i].value);
                if (!k || !v)
                        return fail(x, n, "%s: incomplete mapping", path ? path : "top level");
                if (k->type != YAML_SCALAR_NODE || is_null(k)) {
                        if (!path)
                                return fail(x, k, "keys must be strings, got %s", node_kind(k));
                        return fail(x, k, "%s: keys must be strings, got %s", path, node_kind(k));
                }
                const struct field *f = find_field(sec->sub, k);
                if (!f) {
                        if (!path)
                                return fail(x, k, "unknown key '%s'", esc(e, sval(k), slen(k)));
                        return fail(x, k, "unknown key '%s' in %s", esc(e, sval(k), slen(k)), path);
                }
                /* Earlier keys are all known ones, so this stays short. */
                for (size_t j = 0; j < i; j++) {
                        yaml_node_t *prev = node(x, pairs[j].key);
                        if (scalar_is(prev, f->key)) {
                                if (!path)
                                        return fail(x, k, "duplicate key '%s' (first at line %zu)", f->key,
                                                    prev->start_mark.line + 1);
                                return fail(x, k, "duplicate key '%s' in %s (first at line %zu)", f->key, path,
                                            prev->start_mark.line + 1);
                        }
                }
                char fpath[96];
                snprintf(fpath, sizeof(fpath), "%s%s%s", path ? path : "", path ? "." : "", f->key);
                int r = 0;
                switch (f->kind) {
                case K_SECTION:
                        r = walk_section(x, f, fpath, v);
                        break;
                case K_STRING:
                        r = set_string(x, f, fpath, v);
                        break;
                case K_INT:
                        r = set_int(x, f, fpath, v);
                        break;
                case K_BOOL:
                        r = set_bool(x, f, fpath, v);
                        break;
                case K_DECISION:
                        r = set_decision(x, f, fpath, v);
                        break;
                case K_LIST:
                        r = set_list(x, f, fpath, v);
                        break;
                }
                if (r < 0)
                        return r;
        }
        return sec->finish ? sec->finish(x, n) : 0;
}

/* ---- libyaml ----------------------------------------------------------- */

/* Line and column (0-based) of a byte offset, counting UTF-8 characters. */
static yaml_mark_t mark_of_offset(const unsigned char *text, size_t len, size_t offset) {
        yaml_mark_t m = {.index = offset};
        for (size_t i = 0; i < offset && i < len; i++) {
                if (text[i] == '\n') {
                        m.line++;
                        m.column = 0;
                } else if ((text[i] & 0xc0) != 0x80) {
                        m.column++;
                }
        }
        return m;
}

static int parser_fail(struct ctx *x, yaml_parser_t *p, const unsigned char *text, size_t len) {
        const char *problem = p->problem ? p->problem : "unknown error";
        switch (p->error) {
        case YAML_MEMORY_ERROR:
                return -ENOMEM;
        case YAML_READER_ERROR:
                if (p->problem_value >= 0)
                        return fail_at(x, mark_of_offset(text, len, p->problem_offset),
                                       "not valid UTF-8 YAML: %s (#x%x)", problem, (unsigned)p->problem_value);
                return fail_at(x, mark_of_offset(text, len, p->problem_offset), "not valid UTF-8 YAML: %s",
                               problem);
        default:
                if (p->context)
                        return fail_at(x, p->problem_mark, "syntax error: %s (%s at line %zu, column %zu)",
                                       problem, p->context, p->context_mark.line + 1,
                                       p->context_mark.column + 1);
                return fail_at(x, p->problem_mark, "syntax error: %s", problem);
        }
}

static int event_problem(struct ctx *x, yaml_event_t *ev, int *depth, int *docs) {
        const unsigned char *anchor = NULL, *tag = NULL;
        switch (ev->type) {
        case YAML_DOCUMENT_START_EVENT:
                if (++*docs > 1)
                        return fail_at(x, ev->start_mark, "more than one YAML document");
                return 0;
        case YAML_ALIAS_EVENT:
                return fail_at(x, ev->start_mark, "anchors and aliases are not allowed");
        case YAML_SCALAR_EVENT:
                anchor = ev->data.scalar.anchor;
                tag = ev->data.scalar.tag;
                break;
        case YAML_SEQUENCE_START_EVENT:
                anchor = ev->data.sequence_start.anchor;
                tag = ev->data.sequence_start.tag;
                ++*depth;
                break;
        case YAML_MAPPING_START_EVENT:
                anchor = ev->data.mapping_start.anchor;
                tag = ev->data.mapping_start.tag;
                ++*depth;
                break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
                --*depth;
                return 0;
        default:
                return 0;
        }
        if (anchor)
                return fail_at(x, ev->start_mark, "anchors and aliases are not allowed");
        if (tag)
                return fail_at(x, ev->start_mark, "tags are not allowed");
        if (*depth > CFG_MAX_DEPTH)
                return fail_at(x, ev->start_mark, "nested deeper than %d levels", CFG_MAX_DEPTH);
        return 0;
}

/* First pass: what the document API would hide from the walk. */
static int check_events(struct ctx *x, const unsigned char *text, size_t len) {
        yaml_parser_t p;
        if (!yaml_parser_initialize(&p))
                return -ENOMEM;
        yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
        yaml_parser_set_input_string(&p, text, len);
        int depth = 0, docs = 0, r = 0;
        for (bool done = false; !done && r >= 0;) {
                yaml_event_t ev;
                if (!yaml_parser_parse(&p, &ev)) {
                        r = parser_fail(x, &p, text, len);
                        break;
                }
                done = ev.type == YAML_STREAM_END_EVENT;
                r = event_problem(x, &ev, &depth, &docs);
                yaml_event_delete(&ev);
        }
        yaml_parser_delete(&p);
        return r;
}

/* Second pass: loads the one document and hands its root (NULL when there is
 * none) to walk. */
static int load_and_walk(struct ctx *x, const unsigned char *text, size_t len,
                         int (*walk)(struct ctx *x, yaml_node_t *top, void *userdata), void *userdata) {
        yaml_parser_t p;
        yaml_document_t doc;
        if (!yaml_parser_initialize(&p))
                return -ENOMEM;
        yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
        yaml_parser_set_input_string(&p, text, len);
        int r;
        if (!yaml_parser_load(&p, &doc)) {
                r = parser_fail(x, &p, text, len);
                yaml_parser_delete(&p);
                return r;
        }
        x->doc = &doc;
        r = walk(x, yaml_document_get_root_node(&doc), userdata);
        x->doc = NULL;
        yaml_document_delete(&doc);
        yaml_parser_delete(&p);
        return r;
}

static int walk_root(struct ctx *x, yaml_node_t *top, void *userdata) {
        return top ? walk_section(x, &root, NULL, top) : 0; /* no document: all defaults */
}

static int finish_error(struct ctx *x, int r, char **ret_error) {
        if (r == -ENOMEM && !x->error)
                (void)xasprintf(&x->error, "%s: out of memory", x->filename);
        if (ret_error)
                *ret_error = TAKE_PTR(x->error);
        free(x->error);
        return r;
}

int cfg_parse(const char *text, size_t len, const char *filename, struct cfg **ret, char **ret_error) {
        _cleanup_(cfg_freep) struct cfg *c = NULL;
        struct ctx x = {.filename = filename ? filename : "seed.yaml"};
        int r;
        if (!text && len > 0) {
                r = fail_at(&x, mark_1_1(), "no text");
                return finish_error(&x, r, ret_error);
        }
        if (len > CFG_MAX_BYTES) {
                r = fail_at(&x, mark_1_1(), "larger than 1 MiB (%zu bytes)", len);
                return finish_error(&x, r, ret_error);
        }
        r = cfg_new_default(&c);
        if (r < 0)
                return finish_error(&x, r, ret_error);
        x.cfg = c;
        const unsigned char *t = text ? (const unsigned char *)text : (const unsigned char *)"";
        r = check_events(&x, t, len);
        if (r >= 0)
                r = load_and_walk(&x, t, len, walk_root, NULL);
        if (r < 0)
                return finish_error(&x, r, ret_error);
        *ret = TAKE_PTR(c);
        return 0;
}

int cfg_load(const char *path, struct cfg **ret, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = read_file(path, CFG_MAX_BYTES, &text, &len);
        if (r == -EFBIG) {
                if (ret_error)
                        (void)xasprintf(ret_error, "%s:1:1: larger than 1 MiB", path);
                return -EINVAL;
        }
        if (r < 0) {
                if (ret_error)
                        (void)xasprintf(ret_error, "%s: cannot read: %s", path, strerror(-r));
                return r;
        }
        return cfg_parse(text, len, path, ret, ret_error);
}

/* ---- a flat mapping of scalars ----------------------------------------- */

struct scalars {
        const char *const *keys;
        size_t nkeys;
        char **vals;
};

/* A value worth keeping: a string of valid UTF-8 without NUL, within the cap. */
static bool scalar_keepable(yaml_node_t *v) {
        if (v->type != YAML_SCALAR_NODE || is_null(v) || slen(v) > CFG_SCALAR_VALUE_MAX)
                return false;
        const unsigned char *s = (const unsigned char *)sval(v);
        for (size_t i = 0, n = slen(v); i < n;) {
                size_t k = s[i] ? utf8_seq(s + i, n - i) : 0;
                if (k == 0)
                        return false;
                i += k;
        }
        return true;
}

/* The key of pair p, checked: a string, not seen before in map. */
static int scalars_key(struct ctx *x, yaml_node_t *map, yaml_node_pair_t *p, yaml_node_t **ret) {
        yaml_node_t *k = node(x, p->key);
        char e[ESC_MAX];
        if (!k || k->type != YAML_SCALAR_NODE)
                return fail(x, k ? k : map, "a key must be a string, not %s", k ? node_kind(k) : "nothing");
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
                yaml_node_t *o = node(x, q->key);
                if (o && o->type == YAML_SCALAR_NODE && slen(o) == slen(k) && !memcmp(sval(o), sval(k), slen(k)))
                        return fail(x, k, "duplicate key '%s' (first at line %zu)", esc(e, sval(k), slen(k)),
                                    o->start_mark.line + 1);
        }
        *ret = k;
        return 0;
}

static int walk_scalars(struct ctx *x, yaml_node_t *top, void *userdata) {
        struct scalars *sc = userdata;
        if (!top)
                return 0; /* empty: no values */
        if (top->type != YAML_MAPPING_NODE)
                return fail(x, top, "expected a mapping of keys, got %s", node_kind(top));
        size_t n = (size_t)(top->data.mapping.pairs.top - top->data.mapping.pairs.start);
        if (n > CFG_SCALARS_MAX_KEYS)
                return fail(x, top, "more than %d keys", CFG_SCALARS_MAX_KEYS);
        for (yaml_node_pair_t *p = top->data.mapping.pairs.start; p < top->data.mapping.pairs.top; p++) {
                yaml_node_t *k = NULL, *v = node(x, p->value);
                int r = scalars_key(x, top, p, &k);
                if (r < 0)
                        return r;
                size_t i = 0;
                while (i < sc->nkeys && !scalar_is(k, sc->keys[i]))
                        i++;
                if (i == sc->nkeys || !v || !scalar_keepable(v))
                        continue; /* another key, a list, a map, null, too long: not a value here */
                size_t len = slen(v);
                bool block = v->data.scalar.style == YAML_LITERAL_SCALAR_STYLE ||
                             v->data.scalar.style == YAML_FOLDED_SCALAR_STYLE;
                while (block && len > 0 && sval(v)[len - 1] == '\n')
                        len--; /* a block's final newline is the layout's, not the value's */
                if (!(sc->vals[i] = strndup(sval(v), len)))
                        return -ENOMEM;
        }
        return 0;
}

int cfg_scalars_parse(const char *text, size_t len, const char *filename, const char *const *keys,
                      char **ret_values, char **ret_error) {
        struct ctx x = {.filename = filename ? filename : "yaml"};
        struct scalars sc = {.keys = keys};
        int r;
        if (!keys || !ret_values || (!text && len > 0))
                return -EINVAL;
        if (len > CFG_SCALARS_MAX) {
                r = fail_at(&x, mark_1_1(), "larger than %d KiB (%zu bytes)", CFG_SCALARS_MAX / 1024, len);
                return finish_error(&x, r, ret_error);
        }
        while (keys[sc.nkeys])
                sc.nkeys++;
        if (!(sc.vals = calloc(sc.nkeys + 1, sizeof *sc.vals)))
                return -ENOMEM;
        const unsigned char *t = text ? (const unsigned char *)text : (const unsigned char *)"";
        r = check_events(&x, t, len);
        if (r >= 0)
                r = load_and_walk(&x, t, len, walk_scalars, &sc);
        if (r < 0) {
                for (size_t i = 0; i < sc.nkeys; i++)
                        free(sc.vals[i]);
                free(sc.vals);
                return finish_error(&x, r, ret_error);
        }
        memcpy(ret_values, sc.vals, sc.nkeys * sizeof *sc.vals);
        free(sc.vals);
        return 0;
}

/* ---- SKILL.md front matter (through cfg_scalars_parse) ---- */

/* Whether [p, le) holds only blanks (and a \r). */
static bool blank_line(const char *p, const char *le) {
        for (; p < le; p++)
                if (*p != ' ' && *p != '\t' && *p != '\r')
                        return false;
        return true;
}

/* Whether [p, le) is a "---" line (trailing spaces and \r allowed). */
static bool fence_line(const char *p, const char *le) {
        if (le - p < 3 || strncmp(p, "---", 3) != 0)
                return false;
        return blank_line(p + 3, le);
}

int cfg_front_matter(const char *text, size_t len, const char *filename, const char *const *keys,
                     char **ret_values, char **ret_error) {
        if (!text)
                return -EINVAL;
        const char *end = text + len;
        const char *eol = memchr(text, '\n', len);
        if (!eol || !fence_line(text, eol))
                return -ENOENT;
        const char *start = eol + 1;
        for (const char *p = start; p < end;) {
                const char *e = memchr(p, '\n', (size_t)(end - p));
                const char *le = e ? e : end;
                if (fence_line(p, le)) {
                        return cfg_scalars_parse(start, (size_t)(p - start), filename, keys, ret_values, ret_error);
                }
                p = e ? e + 1 : end;
        }
        return -ENOENT;
}

/* ---- a list of flat records (organism/routines.yaml) ---- */

struct records {
        const char *list_key;
        const char *const *keys;
        size_t nkeys, max;
        struct cfg_record *recs;
        size_t n;
};

void cfg_records_free(struct cfg_record *recs, size_t n) {
        for (size_t i = 0; recs && i < n; i++) {
                for (size_t k = 0; recs[i].values && k < recs[i].n_values; k++)
                        free(recs[i].values[k]);
                free(recs[i].values);
        }
        free(recs);
}

/* One record: a mapping of known keys to strings. */
static int walk_record(struct records *rs, struct ctx *x, yaml_node_t *m, struct cfg_record *ret) {
        char e[ESC_MAX];
        if (m->type != YAML_MAPPING_NODE)
                return fail(x, m, "each entry of '%s' must be a mapping, got %s", rs->list_key, node_kind(m));
        char **vals = calloc(rs->nkeys + 1, sizeof *vals);
        if (!vals)
                return -ENOMEM;
        int r = 0;
        for (yaml_node_pair_t *p = m->data.mapping.pairs.start; r >= 0 && p < m->data.mapping.pairs.top; p++) {
                yaml_node_t *k = NULL, *v = node(x, p->value);
                if ((r = scalars_key(x, m, p, &k)) < 0)
                        break;
                size_t i = 0;
                while (i < rs->nkeys && !scalar_is(k, rs->keys[i]))
                        i++;
                if (i == rs->nkeys)
                        r = fail(x, k, "unknown key '%s'", esc(e, sval(k), slen(k)));
                else if (!v || v->type != YAML_SCALAR_NODE || is_null(v))
                        r = fail(x, v ? v : k, "'%s' must be a string, got %s", rs->keys[i], v ? node_kind(v) : "nothing");
                else if (!scalar_keepable(v))
                        r = fail(x, v, "'%s' must be valid UTF-8 of at most %d bytes", rs->keys[i], CFG_SCALAR_VALUE_MAX);
                else if (!(vals[i] = strndup(sval(v), slen(v))))
                        r = -ENOMEM;
        }
        if (r < 0) {
                for (size_t i = 0; i < rs->nkeys; i++)
                        free(vals[i]);
                free(vals);
                return r;
        }
        *ret = (struct cfg_record){.line = m->start_mark.line + 1, .values = vals, .n_values = rs->nkeys};
        return 0;
}

static int walk_records(struct ctx *x, yaml_node_t *top, void *userdata) {
        struct records *rs = userdata;
        char e[ESC_MAX];
        if (!top)
                return 0; /* empty: no records */
        if (top->type != YAML_MAPPING_NODE)
                return fail(x, top, "expected a mapping with the key '%s', got %s", rs->list_key, node_kind(top));
        yaml_node_t *list = NULL;
        for (yaml_node_pair_t *p = top->data.mapping.pairs.start; p < top->data.mapping.pairs.top; p++) {
                yaml_node_t *k = NULL;
                int r = scalars_key(x, top, p, &k);
                if (r < 0)
                        return r;
                if (!scalar_is(k, rs->list_key))
                        return fail(x, k, "unknown key '%s' (only '%s')", esc(e, sval(k), slen(k)), rs->list_key);
                list = node(x, p->value);
        }
        if (!list || is_null(list))
                return 0;
        if (list->type != YAML_SEQUENCE_NODE)
                return fail(x, list, "'%s' must be a list, got %s", rs->list_key, node_kind(list));
        size_t n = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
        if (n > rs->max)
                return fail(x, list, "more than %zu entries in '%s'", rs->max, rs->list_key);
        if (!(rs->recs = calloc(n + 1, sizeof *rs->recs)))
                return -ENOMEM;
        for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
                yaml_node_t *m = node(x, *it);
                int r = m ? walk_record(rs, x, m, &rs->recs[rs->n]) : fail(x, list, "an empty entry");
                if (r < 0)
                        return r;
                rs->n++;
        }
        return 0;
}

int cfg_records_parse(const char *text, size_t len, const char *filename, const char *list_key,
                      const char *const *keys, size_t max, struct cfg_record **ret, size_t *ret_n,
                      char **ret_error) {
        struct ctx x = {.filename = filename ? filename : "yaml"};
        struct records rs = {.list_key = list_key, .keys = keys, .max = max};
        int r;
        if (!list_key || !keys || !ret || !ret_n || (!text && len > 0))
                return -EINVAL;
        if (len > CFG_SCALARS_MAX) {
                r = fail_at(&x, mark_1_1(), "larger than %d KiB (%zu bytes)", CFG_SCALARS_MAX / 1024, len);
                return finish_error(&x, r, ret_error);
        }
        while (keys[rs.nkeys])
                rs.nkeys++;
        const unsigned char *t = text ? (const unsigned char *)text : (const unsigned char *)"";
        r = check_events(&x, t, len);
        if (r >= 0)
                r = load_and_walk(&x, t, len, walk_records, &rs);
        if (r < 0) {
                cfg_records_free(rs.recs, rs.n);
                return finish_error(&x, r, ret_error);
        }
        *ret = rs.recs;
        *ret_n = rs.n;
        return 0;
}
