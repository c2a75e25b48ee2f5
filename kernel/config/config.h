/* config.h — seed.yaml: the whole schema of SPEC §3 with its defaults; and
 * the flat YAML mappings of knowledge/self.yaml and SKILL.md front matter
 * (cfg_scalars_parse). The only libyaml user: one YAML reader. Unknown keys, wrong types and out-of-range values are
 * errors naming file, line and column: "seed.yaml:4:3: unknown key 'foo' in server". */
#pragma once

#include "base/base.h"

enum cfg_decision { CFG_ALLOW, CFG_ASK, CFG_DENY };

/* model.context_chars: about 75k tokens by default, well inside the
 * context of every model we offer; bounded so a request is never tiny nor
 * larger than any model takes. */
#define CFG_CONTEXT_CHARS_DEFAULT 300000
#define CFG_CONTEXT_CHARS_MIN 20000
#define CFG_CONTEXT_CHARS_MAX 4000000

struct cfg {
        char *name;                      /* ^[a-z][a-z0-9-]{0,40}$, default "seed" */
        struct {
                char *addr;              /* HOST:PORT, default 127.0.0.1:8080 */
                char **allowed_hosts;    /* NULL-terminated, never NULL */
                /* The control plane's own origin (default seed.localhost): a
                 * *.localhost name or one of allowed_hosts. "": the same-origin
                 * fallback, /_seed on every allowed host beside the organism. */
                char *control_host;
                /* How long a point-and-ask picture is kept (ask/drafts.h):
                 * 1..1800 seconds, default 1800 (30 minutes). */
                int ask_draft_seconds;
        } server;
        struct {
                char *provider;          /* openrouter|openai|anthropic|openai-compatible */
                char *name;              /* default "anthropic/claude-sonnet-4.5" */
                char *base_url;          /* openai-compatible only ("" otherwise) */
                char *api_key_env;       /* openai-compatible: env name of the key ("" = none) */
                int max_tokens;          /* 1..1000000, default 16000 */
                int context_chars;       /* what one request may hold: the system prompt, the
                                          * tool definitions and the conversation (UTF-8
                                          * bytes); CFG_CONTEXT_CHARS_MIN..MAX, default
                                          * CFG_CONTEXT_CHARS_DEFAULT (kernel/agent compacts) */
        } model;
        struct {
                char *url;               /* "" = private PostgreSQL */
        } database;
        struct {
                char *driver;            /* only "bwrap" */
        } sandbox;
        struct {
                char *build, *test, *run;
                int port;                /* 1..65535, default 8080 */
                char *health;            /* starts with '/', default /healthz */
                char *migrations;        /* relative path, default organism/migrations */
        } organism;
        struct {
                int max_repair_attempts;     /* 0..20, default 3 */
                int max_agent_turns;         /* 1..1000, default 150 */
                int command_timeout_seconds; /* 1..86400, default 900 */
                /* How long an evolution waits out a model that cannot be
                 * reached (its retries spent on transient failures) before
                 * it fails: 0..86400, default 900 (0: fail at once). */
                int model_wait_seconds;
                /* How long a preview waits for the owner's decision before
                 * it is discarded: 1..43200 (the preview cookie's 12 h),
                 * default 43200. */
                int preview_wait_seconds;
        } evolution;
        struct {
                enum cfg_decision safe, review, dangerous; /* allow, allow, ask */
                bool require_plan_approval, require_apply_approval;
        } permissions;
        struct {
                char **evolvable;        /* relative dirs ending in '/', default organism/ knowledge/ skills/ */
        } kernel;
        struct {
                /* Host patterns ("registry.example.com", "*.example.com")
                 * that evolution, build, test and install commands may reach
                 * besides the registries the machine's package clients are
                 * configured to use (kernel/registries); each one a pattern
                 * egress_pattern_check() accepts, lowercased, without a
                 * trailing dot. Default: none. */
                char **registries;
        } egress;
        struct {
                /* Prices for models whose provider reports no cost, each
                 * "PREFIX INPUT OUTPUT" (USD per million tokens; checked by
                 * spend_price_parse, kernel/spend/prices.h); they override
                 * the built-in table. Default: none. */
                char **prices;
        } spend;
};

/* A config holding every default. Caller frees with cfg_free(). */
int cfg_new_default(struct cfg **ret);
/* Parses YAML text (at most 1 MiB, one document, no anchors, aliases or tags);
 * filename is used in error messages. An empty document, or one with only
 * comments, gives every default; a missing key, or a section left empty
 * ("server:" with nothing under it), keeps its defaults. Errors point at the
 * offending value (or key, for unknown and duplicate keys). On error returns
 * -EINVAL (-ENOMEM when out of memory) and sets *ret_error (caller frees;
 * ret_error may be NULL). Never echoes database.url. */
int cfg_parse(const char *text, size_t len, const char *filename, struct cfg **ret, char **ret_error);
/* Reads and parses a file (at most 1 MiB). A missing file is an error:
 * returns its -errno and sets *ret_error ("path: cannot read: ..."). Error
 * messages name the file as path. */
int cfg_load(const char *path, struct cfg **ret, char **ret_error);
void cfg_free(struct cfg *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct cfg *, cfg_free)
const char *cfg_decision_name(enum cfg_decision d);
/* True when every setting of a and b is the same. */
bool cfg_equal(const struct cfg *a, const struct cfg *b);
/* Splits "host:port" / "[v6]:port" (host name or IPv4; IPv6 only in brackets;
 * port 1..65535). -EINVAL when malformed. Caller frees *ret_host, which has
 * no brackets. */
int cfg_split_addr(const char *addr, char **ret_host, int *ret_port);

#define CFG_SCALARS_MAX (64 * 1024)        /* a self.yaml or front matter */
#define CFG_SCALAR_VALUE_MAX (8 * 1024)    /* one value kept */
#define CFG_SCALARS_MAX_KEYS 256

/* A few top-level string values of a YAML mapping (knowledge/self.yaml,
 * SKILL.md front matter), read as strictly as seed.yaml: one document of at
 * most CFG_SCALARS_MAX bytes, no anchors, aliases or tags, at most 16 levels
 * deep, at most CFG_SCALARS_MAX_KEYS keys, none twice. keys is
 * NULL-terminated; ret_values[i] gets a copy of key i's value (caller frees
 * each) when it is a non-null scalar of valid UTF-8 without NUL and at most
 * CFG_SCALAR_VALUE_MAX bytes, else NULL (on error ret_values is untouched);
 * a "|" or ">" block loses its final newlines.
 * Other keys and other values (lists such as capabilities, nested maps) are
 * allowed and skipped. An empty document has no values. -EINVAL with
 * *ret_error ("file:line:col: message"; caller frees; may be NULL),
 * -ENOMEM. */
int cfg_scalars_parse(const char *text, size_t len, const char *filename, const char *const *keys,
                      char **ret_values, char **ret_error);

/* SKILL.md front matter: the text between a first line "---" and the next
 * "---" line, read by cfg_scalars_parse() (whose errors name filename);
 * -ENOENT without one. */
int cfg_front_matter(const char *text, size_t len, const char *filename, const char *const *keys,
                     char **ret_values, char **ret_error);

/* A list of flat records (organism/routines.yaml): one document, a mapping
 * whose only key is list_key, its value a list (empty or null: none) of at
 * most max mappings, each of keys (NULL-terminated) to strings; an unknown
 * key, a value that is not a string, anything else is an error naming the
 * line and column. Read as strictly as seed.yaml (no anchors, aliases or
 * tags; at most CFG_SCALARS_MAX bytes). *ret (caller frees with
 * cfg_records_free(*ret, *ret_n)): record i's values[k] is key k's value, or
 * NULL where absent; line is where the record starts (1-based). -EINVAL with
 * *ret_error ("file:line:col: message"; caller frees; may be NULL), -ENOMEM. */
struct cfg_record {
        size_t line;
        char **values;   /* n_values (the number of keys) entries */
        size_t n_values;
};
int cfg_records_parse(const char *text, size_t len, const char *filename, const char *list_key,
                      const char *const *keys, size_t max, struct cfg_record **ret, size_t *ret_n,
                      char **ret_error);
void cfg_records_free(struct cfg_record *recs, size_t n);
