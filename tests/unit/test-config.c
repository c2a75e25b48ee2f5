/* test-config.c — seed.yaml: defaults, a full file, every error class with its
 * exact "file:line:col: message", cfg_split_addr, and the repository's own
 * seed.yaml, which must parse to exactly the defaults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "config/config.h"
#include "model/providers.h"

#include <sys/stat.h>

static struct cfg *parse_ok(const char *yaml) {
        struct cfg *c = NULL;
        char *err = NULL;
        int r = cfg_parse(yaml, strlen(yaml), "seed.yaml", &c, &err);
        if (r < 0)
                print_error("unexpected error: %s\n", err ? err : "(none)");
        assert_int_equal(r, 0);
        assert_null(err);
        assert_non_null(c);
        return c;
}

static void expect_error_len(const char *yaml, size_t len, const char *expected) {
        struct cfg *c = NULL;
        char *err = NULL;
        int r = cfg_parse(yaml, len, "seed.yaml", &c, &err);
        if (r >= 0)
                print_error("parsed although it should fail with: %s\n", expected);
        assert_int_equal(r, -EINVAL);
        assert_null(c);
        assert_non_null(err);
        assert_string_equal(err, expected);
        free(err);
}

static void expect_error(const char *yaml, const char *expected) {
        expect_error_len(yaml, strlen(yaml), expected);
}

static void assert_strv(char **v, const char *const *want, size_t n) {
        assert_non_null(v);
        assert_int_equal(strv_length(v), n);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(v[i], want[i]);
}

static void assert_defaults(const struct cfg *c) {
        static const char *const evolvable[] = {"organism/", "knowledge/", "skills/"};
        assert_string_equal(c->name, "seed");
        assert_string_equal(c->server.addr, "127.0.0.1:8080");
        assert_strv(c->server.allowed_hosts, NULL, 0);
        assert_string_equal(c->server.control_host, "seed.localhost");
        assert_string_equal(c->model.provider, "openrouter");
        assert_string_equal(c->model.name, "anthropic/claude-sonnet-4.5");
        assert_string_equal(c->model.base_url, "");
        assert_string_equal(c->model.api_key_env, "");
        assert_int_equal(c->model.max_tokens, 16000);
        assert_int_equal(c->model.context_chars, CFG_CONTEXT_CHARS_DEFAULT);
        assert_string_equal(c->database.url, "");
        assert_string_equal(c->sandbox.driver, "bwrap");
        assert_string_equal(c->organism.build, "make -C organism build");
        assert_string_equal(c->organism.test, "make -C organism test");
        assert_string_equal(c->organism.run, "organism/bin/server");
        assert_int_equal(c->organism.port, 8080);
        assert_string_equal(c->organism.health, "/healthz");
        assert_string_equal(c->organism.migrations, "organism/migrations");
        assert_int_equal(c->evolution.max_repair_attempts, 3);
        assert_int_equal(c->evolution.max_agent_turns, 150);
        assert_int_equal(c->evolution.command_timeout_seconds, 900);
        assert_int_equal(c->evolution.model_wait_seconds, 900);
        assert_int_equal(c->evolution.preview_wait_seconds, 43200);
        assert_int_equal(c->permissions.safe, CFG_ALLOW);
        assert_int_equal(c->permissions.review, CFG_ALLOW);
        assert_int_equal(c->permissions.dangerous, CFG_ASK);
        assert_false(c->permissions.require_plan_approval);
        assert_false(c->permissions.require_apply_approval);
        assert_strv(c->kernel.evolvable, evolvable, 3);
        assert_strv(c->egress.registries, NULL, 0);
}

static void test_defaults(void **state) {
        struct cfg *c = NULL;
        assert_int_equal(cfg_new_default(&c), 0);
        assert_defaults(c);
        cfg_free(c);
        cfg_free(NULL);
        assert_string_equal(cfg_decision_name(CFG_ALLOW), "allow");
        assert_string_equal(cfg_decision_name(CFG_ASK), "ask");
        assert_string_equal(cfg_decision_name(CFG_DENY), "deny");
}

static void test_empty_gives_defaults(void **state) {
        static const char *const texts[] = {
                "",
                "# only a comment\n\n   # another\n",
                "---\n",
                "---\n...\n",
                "~\n",
                "server:\n# addr: commented out\nmodel:\n",
                "\xef\xbb\xbfname: seed\n", /* UTF-8 byte order mark */
        };
        for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
                struct cfg *c = parse_ok(texts[i]);
                assert_defaults(c);
                cfg_free(c);
        }
        struct cfg *c = NULL;
        assert_int_equal(cfg_parse(NULL, 0, NULL, &c, NULL), 0);
        assert_defaults(c);
        cfg_free(c);
}

static const char full_yaml[] =
        "name: my-app-2\n"
        "server:\n"
        "  addr: '[::1]:9090'\n"
        "  allowed_hosts: [Example.COM, seed.internal.example.org, 192.168.1.10]\n"
        "model:\n"
        "  provider: openai-compatible\n"
        "  name: llama3.1:8b\n"
        "  base_url: http://127.0.0.1:11434/v1\n"
        "  api_key_env: LOCAL_KEY\n"
        "  max_tokens: 1000000\n"
        "database:\n"
        "  url: \"postgres://db.example.com/seed\"\n"
        "sandbox:\n"
        "  driver: bwrap\n"
        "organism:\n"
        "  build: |\n"
        "    make -C organism deps\n"
        "    make -C organism build\n"
        "  test: npm test --prefix organism\n"
        "  run: organism/bin/app --fast\n"
        "  port: 1\n"
        "  health: /health/ready?x=1\n"
        "  migrations: organism/db/migrations/\n"
        "evolution:\n"
        "  max_repair_attempts: 0\n"
        "  max_agent_turns: 1000\n"
        "  command_timeout_seconds: 86400\n"
        "  model_wait_seconds: 0\n"
        "  preview_wait_seconds: 1\n"
        "permissions:\n"
        "  safe: allow\n"
        "  review: 'ask'\n"
        "  dangerous: deny\n"
        "  require_plan_approval: true\n"
        "  require_apply_approval: true\n"
        "kernel:\n"
        "  evolvable:\n"
        "    - organism/\n"
        "    - docs/site/\n";

static void test_full_file(void **state) {
        static const char *const hosts[] = {"example.com", "seed.internal.example.org", "192.168.1.10"};
        static const char *const evolvable[] = {"organism/", "docs/site/"};
        struct cfg *c = parse_ok(full_yaml);
        assert_string_equal(c->name, "my-app-2");
        assert_string_equal(c->server.addr, "[::1]:9090");
        assert_strv(c->server.allowed_hosts, hosts, 3);
        assert_string_equal(c->model.provider, "openai-compatible");
        assert_string_equal(c->model.name, "llama3.1:8b");
        assert_string_equal(c->model.base_url, "http://127.0.0.1:11434/v1");
        assert_string_equal(c->model.api_key_env, "LOCAL_KEY");
        assert_int_equal(c->model.max_tokens, 1000000);
        assert_string_equal(c->database.url, "postgres://db.example.com/seed");
        assert_string_equal(c->sandbox.driver, "bwrap");
        assert_string_equal(c->organism.build, "make -C organism deps\nmake -C organism build\n");
        assert_string_equal(c->organism.test, "npm test --prefix organism");
        assert_string_equal(c->organism.run, "organism/bin/app --fast");
        assert_int_equal(c->organism.port, 1);
        assert_string_equal(c->organism.health, "/health/ready?x=1");
        assert_string_equal(c->organism.migrations, "organism/db/migrations/");
        assert_int_equal(c->evolution.max_repair_attempts, 0);
        assert_int_equal(c->evolution.max_agent_turns, 1000);
        assert_int_equal(c->evolution.command_timeout_seconds, 86400);
        assert_int_equal(c->evolution.model_wait_seconds, 0);
        assert_int_equal(c->evolution.preview_wait_seconds, 1);
        assert_int_equal(c->permissions.safe, CFG_ALLOW);
        assert_int_equal(c->permissions.review, CFG_ASK);
        assert_int_equal(c->permissions.dangerous, CFG_DENY);
        assert_true(c->permissions.require_plan_approval);
        assert_true(c->permissions.require_apply_approval);
        assert_strv(c->kernel.evolvable, evolvable, 2);

        struct cfg *d = NULL;
        assert_int_equal(cfg_new_default(&d), 0);
        assert_false(cfg_equal(c, d));
        cfg_free(d);
        cfg_free(c);
}

static void test_partial_and_flow(void **state) {
        /* Flow style as in SPEC §3; keys left out keep their defaults. */
        struct cfg *c = parse_ok("server: {addr: 0.0.0.0:80, allowed_hosts: []}\n"
                                 "evolution: {max_agent_turns: 7}\n"
                                 "kernel: {evolvable: []}\n");
        assert_string_equal(c->server.addr, "0.0.0.0:80");
        assert_string_equal(c->server.control_host, "seed.localhost");
        assert_int_equal(c->evolution.max_agent_turns, 7);
        assert_int_equal(c->evolution.max_repair_attempts, 3);
        assert_int_equal(strv_length(c->kernel.evolvable), 0);
        assert_non_null(c->kernel.evolvable);
        assert_string_equal(c->name, "seed");
        assert_string_equal(c->model.provider, "openrouter");

        struct cfg *d = NULL;
        assert_int_equal(cfg_new_default(&d), 0);
        assert_false(cfg_equal(c, d));
        assert_true(cfg_equal(d, d));
        cfg_free(d);
        cfg_free(c);

        c = parse_ok("model: {provider: anthropic, name: claude-x}\n");
        assert_string_equal(c->model.provider, "anthropic");
        assert_string_equal(c->model.name, "claude-x");
        assert_int_equal(c->model.max_tokens, 16000);
        cfg_free(c);
}

static void test_control_host(void **state) {
        struct cfg *c = parse_ok("server: {control_host: ''}\n");
        assert_string_equal(c->server.control_host, ""); /* the same-origin fallback */
        cfg_free(c);
        c = parse_ok("server: {allowed_hosts: [tasks.example.com, seed.tasks.example.com],\n"
                     "         control_host: Seed.Tasks.Example.com}\n");
        assert_string_equal(c->server.control_host, "seed.tasks.example.com");
        cfg_free(c);
        c = parse_ok("server: {control_host: cp.localhost}\n");
        assert_string_equal(c->server.control_host, "cp.localhost");
        cfg_free(c);
}

static void test_error_messages(void **state) {
        /* Unknown keys point at the key. */
        expect_error("server:\n  addr: 127.0.0.1:8080\n  foo: 1\n", "seed.yaml:3:3: unknown key 'foo' in server");
        expect_error("name: seed\nfoo: 1\n", "seed.yaml:2:1: unknown key 'foo'");
        expect_error("kernel:\n  evolvable: []\n  \"x\\ty\": 1\n", "seed.yaml:3:3: unknown key 'x\\x09y' in kernel");
        expect_error("? [a]\n: 1\n", "seed.yaml:1:3: keys must be strings, got a sequence");
        /* Wrong types point at the value. */
        expect_error("\nname: {a: 1}\n", "seed.yaml:2:7: name: expected a string, got a mapping");
        expect_error("name: [a]\n", "seed.yaml:1:7: name: expected a string, got a sequence");
        expect_error("name:\n", "seed.yaml:1:6: name: expected a string, got null");
        expect_error("name: true\n", "seed.yaml:1:7: name: expected a string, got a boolean");
        expect_error("server: 5\n", "seed.yaml:1:9: server: expected a mapping, got an integer");
        expect_error("server: [a]\n", "seed.yaml:1:9: server: expected a mapping, got a sequence");
        expect_error("server:\n  allowed_hosts: x.com\n",
                     "seed.yaml:2:18: server.allowed_hosts: expected a sequence, got a string");
        expect_error("server:\n  allowed_hosts:\n",
                     "seed.yaml:2:17: server.allowed_hosts: expected a sequence, got null");
        expect_error("kernel:\n  evolvable: [organism/, {a: b}]\n",
                     "seed.yaml:2:26: kernel.evolvable[1]: expected a string, got a mapping");
        expect_error("server:\n  control_host: seed.example.com\n",
                     "seed.yaml:2:17: server.control_host: 'seed.example.com' must be a *.localhost name or one "
                     "of server.allowed_hosts (or \"\" for the same-origin layout)");
        expect_error("server:\n  control_host: organism.localhost\n",
                     "seed.yaml:2:17: server.control_host: 'organism.localhost' is the organism's admin origin, "
                     "never the control plane's");
        expect_error("server:\n  control_host: 'http://x'\n",
                     "seed.yaml:2:17: server.control_host: 'http://x' is not a plain host name (no scheme, port, "
                     "path or wildcard)");
        expect_error("- a\n- b\n", "seed.yaml:1:1: expected a mapping at the top level, got a sequence");
        expect_error("hello\n", "seed.yaml:1:1: expected a mapping at the top level, got a string");
        /* Name. */
        expect_error("name: Bad_Name\n", "seed.yaml:1:7: name: 'Bad_Name' does not match ^[a-z][a-z0-9-]{0,40}$");
        expect_error("name: 1abc\n", "seed.yaml:1:7: name: '1abc' does not match ^[a-z][a-z0-9-]{0,40}$");
        expect_error("name: ''\n", "seed.yaml:1:7: name: '' does not match ^[a-z][a-z0-9-]{0,40}$");
        expect_error("name: abcdefghijabcdefghijabcdefghijabcdefghijxy\n",
                     "seed.yaml:1:7: name: 'abcdefghijabcdefghijabcdefghijabcdefghijxy' "
                     "does not match ^[a-z][a-z0-9-]{0,40}$");
        /* 41 characters is the longest name. */
        struct cfg *c = parse_ok("name: abcdefghijabcdefghijabcdefghijabcdefghijx\n");
        assert_string_equal(c->name, "abcdefghijabcdefghijabcdefghijabcdefghijx");
        cfg_free(c);
        /* Integers: plain decimal only, bounded. */
        expect_error("organism:\n  port: 70000\n", "seed.yaml:2:9: organism.port: 70000 is out of range (1-65535)");
        expect_error("organism: {port: 0}\n", "seed.yaml:1:18: organism.port: 0 is out of range (1-65535)");
        expect_error("model:\n  max_tokens: -5\n", "seed.yaml:2:15: model.max_tokens: -5 is out of range (1-1000000)");
        expect_error("model:\n  max_tokens: 99999999999999999999999\n",
                     "seed.yaml:2:15: model.max_tokens: 99999999999999999999999 is out of range (1-1000000)");
        expect_error("model:\n  context_chars: 19999\n",
                     "seed.yaml:2:18: model.context_chars: 19999 is out of range (20000-4000000)");
        expect_error("model:\n  context_chars: 4000001\n",
                     "seed.yaml:2:18: model.context_chars: 4000001 is out of range (20000-4000000)");
        c = parse_ok("model: {context_chars: 20000}\n");
        assert_int_equal(c->model.context_chars, 20000);
        cfg_free(c);
        expect_error("organism:\n  port: 0x50\n",
                     "seed.yaml:2:9: organism.port: expected a plain decimal integer, got '0x50'");
        expect_error("organism:\n  port: 080\n",
                     "seed.yaml:2:9: organism.port: expected a plain decimal integer, got '080'");
        expect_error("organism:\n  port: 8.5\n",
                     "seed.yaml:2:9: organism.port: expected a plain decimal integer, got '8.5'");
        expect_error("organism:\n  port: \"80\"\n", "seed.yaml:2:9: organism.port: expected an integer, got a string");
        expect_error("evolution:\n  max_repair_attempts: 21\n",
                     "seed.yaml:2:24: evolution.max_repair_attempts: 21 is out of range (0-20)");
        expect_error("evolution:\n  max_agent_turns: 0\n",
                     "seed.yaml:2:20: evolution.max_agent_turns: 0 is out of range (1-1000)");
        expect_error("evolution:\n  command_timeout_seconds: 86401\n",
                     "seed.yaml:2:28: evolution.command_timeout_seconds: 86401 is out of range (1-86400)");
        expect_error("evolution:\n  model_wait_seconds: -1\n",
                     "seed.yaml:2:23: evolution.model_wait_seconds: -1 is out of range (0-86400)");
        expect_error("evolution:\n  preview_wait_seconds: 43201\n",
                     "seed.yaml:2:25: evolution.preview_wait_seconds: 43201 is out of range (1-43200)");
        expect_error("evolution:\n  preview_wait_seconds: 0\n",
                     "seed.yaml:2:25: evolution.preview_wait_seconds: 0 is out of range (1-43200)");
        expect_error("evolution:\n  model_wait_seconds: 15m\n",
                     "seed.yaml:2:23: evolution.model_wait_seconds: expected a plain decimal integer, got '15m'");
        /* Booleans: true/false only. */
        expect_error("permissions:\n  require_plan_approval: yes\n",
                     "seed.yaml:2:26: permissions.require_plan_approval: expected true or false, got 'yes'");
        expect_error("permissions:\n  require_apply_approval: 'true'\n",
                     "seed.yaml:2:27: permissions.require_apply_approval: expected true or false, got 'true'");
        expect_error("permissions:\n  require_apply_approval: True\n",
                     "seed.yaml:2:27: permissions.require_apply_approval: expected true or false, got 'True'");
        expect_error("permissions:\n  require_apply_approval: []\n",
                     "seed.yaml:2:27: permissions.require_apply_approval: expected true or false, got a sequence");
        /* Permissions. */
        expect_error("permissions:\n  safe: maybe\n",
                     "seed.yaml:2:9: permissions.safe: 'maybe' is not one of allow, ask, deny");
        expect_error("permissions:\n  dangerous: Allow\n",
                     "seed.yaml:2:14: permissions.dangerous: 'Allow' is not one of allow, ask, deny");
        expect_error("permissions:\n  review: {}\n",
                     "seed.yaml:2:11: permissions.review: expected allow, ask or deny, got a mapping");
        /* Sandbox. */
        expect_error("sandbox:\n  driver: none\n",
                     "seed.yaml:2:11: sandbox.driver: 'none' is not supported: the only driver is bwrap "
                     "(there is no unsandboxed mode)");
        /* Organism. */
        expect_error("organism:\n  build: ''\n", "seed.yaml:2:10: organism.build: must not be empty");
        expect_error("organism:\n  health: healthz\n",
                     "seed.yaml:2:11: organism.health: 'healthz' must be a URL path starting with '/'");
        expect_error("organism:\n  migrations: /var/lib/x\n",
                     "seed.yaml:2:15: organism.migrations: '/var/lib/x' must be relative to the Seed's folder, "
                     "not absolute");
        expect_error("organism:\n  migrations: organism/../../etc\n",
                     "seed.yaml:2:15: organism.migrations: 'organism/../../etc' must not contain '..'");
}

/* egress.registries: host patterns, normalised; anything the proxy could not
 * allow is an error at its line and column. */
static void expect_error_prefix(const char *yaml, const char *prefix) {
        struct cfg *c = NULL;
        char *err = NULL;
        assert_int_equal(cfg_parse(yaml, strlen(yaml), "seed.yaml", &c, &err), -EINVAL);
        assert_null(c);
        assert_non_null(err);
        if (strncmp(err, prefix, strlen(prefix)) != 0)
                print_error("got: %s\nwanted a message starting with: %s\n", err, prefix);
        assert_true(strncmp(err, prefix, strlen(prefix)) == 0);
        free(err);
}

static void test_egress_registries(void **state) {
        static const char *const want[] = {"registry.example.com", "*.mirror.example.org"};
        struct cfg *c = parse_ok("egress:\n  registries:\n    - Registry.Example.COM.\n    - '*.mirror.example.org'\n");
        assert_strv(c->egress.registries, want, 2);
        cfg_free(c);
        c = parse_ok("egress: {}\n");
        assert_strv(c->egress.registries, NULL, 0);
        cfg_free(c);
        expect_error_prefix("egress:\n  registries: ['10.0.0.1']\n",
                            "seed.yaml:2:16: egress.registries[0]: '10.0.0.1' is not a host pattern the proxy can allow (");
        expect_error_prefix("egress:\n  registries: [localhost]\n",
                            "seed.yaml:2:16: egress.registries[0]: 'localhost' is not a host pattern the proxy can allow (");
        expect_error_prefix("egress:\n  registries: [a.example.com, 'https://b.example.com/']\n",
                            "seed.yaml:2:31: egress.registries[1]: 'https://b.example.com/' is not a host pattern");
        expect_error_prefix("egress:\n  registries: ['*']\n",
                            "seed.yaml:2:16: egress.registries[0]: '*' is not a host pattern the proxy can allow (");
        expect_error("egress:\n  registries: [a.example.com, A.example.com]\n",
                     "seed.yaml:2:31: egress.registries[1]: duplicate entry 'a.example.com'");
        expect_error("egress:\n  registries: a.example.com\n",
                     "seed.yaml:2:15: egress.registries: expected a sequence, got a string");
        expect_error("egress:\n  hosts: []\n", "seed.yaml:2:3: unknown key 'hosts' in egress");
}

static void test_spend_prices(void **state) {
        static const char *const want[] = {"qwen2.5 0 0", "claude-sonnet-4 3.5 15.25"};
        struct cfg *c = parse_ok("spend:\n  prices:\n    - qwen2.5 0 0\n    - claude-sonnet-4 3.5 15.25\n");
        assert_strv(c->spend.prices, want, 2);
        cfg_free(c);
        c = parse_ok("name: a\n");
        assert_strv(c->spend.prices, NULL, 0);
        cfg_free(c);
        expect_error_prefix("spend:\n  prices: ['gpt-4o 2.5']\n",
                            "seed.yaml:2:12: spend.prices[0]: 'gpt-4o 2.5': expected \"PREFIX INPUT OUTPUT\"");
        expect_error("spend:\n  prices: ['gpt-4o -1 2']\n",
                     "seed.yaml:2:12: spend.prices[0]: 'gpt-4o -1 2': a price must be a plain decimal number of USD "
                     "per million tokens (e.g. 3 or 0.25)");
        expect_error("spend:\n  prices: ['gpt-4o 1 20000']\n",
                     "seed.yaml:2:12: spend.prices[0]: 'gpt-4o 1 20000': a price must be from 0 to 10000 USD per "
                     "million tokens");
        expect_error("spend:\n  prices: ['gpt-4o 1e3 2']\n",
                     "seed.yaml:2:12: spend.prices[0]: 'gpt-4o 1e3 2': a price must be a plain decimal number of USD "
                     "per million tokens (e.g. 3 or 0.25)");
        expect_error("spend:\n  budget: 10\n", "seed.yaml:2:3: unknown key 'budget' in spend");
}

static void test_error_duplicates(void **state) {
        expect_error("name: a\nname: b\n", "seed.yaml:2:1: duplicate key 'name' (first at line 1)");
        expect_error("server:\n  addr: 127.0.0.1:1\n  addr: 127.0.0.1:2\n",
                     "seed.yaml:3:3: duplicate key 'addr' in server (first at line 2)");
        expect_error("model: {name: a, \"name\": b}\n",
                     "seed.yaml:1:18: duplicate key 'name' in model (first at line 1)");
        expect_error("server:\n  addr: 127.0.0.1:1\nserver:\n  addr: 127.0.0.1:2\n",
                     "seed.yaml:3:1: duplicate key 'server' (first at line 1)");
        expect_error("kernel:\n  evolvable: [a/, b/, a/]\n",
                     "seed.yaml:2:23: kernel.evolvable[2]: duplicate entry 'a/'");
        expect_error("server:\n  allowed_hosts: [X.com, x.com]\n",
                     "seed.yaml:2:26: server.allowed_hosts[1]: duplicate entry 'x.com'");
}

static void test_error_yaml_level(void **state) {
        /* Syntax errors carry libyaml's problem mark. */
        expect_error("name: a\n  b: c\n", "seed.yaml:2:4: syntax error: mapping values are not allowed in this context");
        expect_error("server: {addr: x\n",
                     "seed.yaml:2:1: syntax error: did not find expected ',' or '}' "
                     "(while parsing a flow mapping at line 1, column 9)");
        expect_error("name: \"abc\n", "seed.yaml:2:1: syntax error: found unexpected end of stream "
                                      "(while scanning a quoted scalar at line 1, column 7)");
        expect_error("name: a\n\tserver: b\n",
                     "seed.yaml:2:1: syntax error: found a tab character that violates indentation "
                     "(while scanning a plain scalar at line 1, column 7)");
        /* Not UTF-8, control characters. */
        expect_error("name: seed\nmodel: \xff\n", "seed.yaml:2:8: not valid UTF-8 YAML: invalid leading UTF-8 octet (#xff)");
        expect_error_len("name: se\0ed\n", 11, "seed.yaml:1:9: not valid UTF-8 YAML: control characters are not allowed (#x0)");
        expect_error("name: \"se\\0ed\"\n", "seed.yaml:1:7: name: contains a NUL character");
        /* Anchors and aliases (billion laughs), tags. */
        expect_error("name: &n seed\n", "seed.yaml:1:7: anchors and aliases are not allowed");
        expect_error("name: *n\n", "seed.yaml:1:7: anchors and aliases are not allowed");
        expect_error("a: &a [x, x, x, x, x, x, x, x, x]\n"
                     "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                     "c: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
                     "seed.yaml:1:4: anchors and aliases are not allowed");
        expect_error("name: !!str seed\n", "seed.yaml:1:7: tags are not allowed");
        expect_error("server: !m {addr: x}\n", "seed.yaml:1:9: tags are not allowed");
        /* One document only. */
        expect_error("name: a\n---\nname: b\n", "seed.yaml:2:1: more than one YAML document");
        expect_error("---\nname: a\n...\n---\n", "seed.yaml:4:1: more than one YAML document");
        /* Nesting depth and size. */
        expect_error("a: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
                     "seed.yaml:1:19: nested deeper than 16 levels");
        size_t big = 1024 * 1024 + 1;
        char *text = malloc(big);
        assert_non_null(text);
        memset(text, '#', big);
        expect_error_len(text, big, "seed.yaml:1:1: larger than 1 MiB (1048577 bytes)");
        /* Exactly 1 MiB of comment is fine. */
        struct cfg *c = NULL;
        assert_int_equal(cfg_parse(text, big - 1, "seed.yaml", &c, NULL), 0);
        assert_defaults(c);
        cfg_free(c);
        free(text);
        /* A long scalar. */
        static char longname[5100] = "name: ";
        memset(longname + 6, 'a', 5000);
        longname[5006] = '\n';
        expect_error(longname, "seed.yaml:1:7: name: longer than 4096 bytes");
}

static void test_error_model(void **state) {
        expect_error("model:\n  provider: foo\n",
                     "seed.yaml:2:13: model.provider: unknown provider 'foo' "
                     "(expected openrouter, openai, anthropic or openai-compatible)");
        expect_error("model:\n  provider: openai-compatible\n",
                     "seed.yaml:2:13: model: provider 'openai-compatible' needs base_url");
        expect_error("model:\n  provider: openai-compatible\n  base_url: ''\n",
                     "seed.yaml:2:13: model: provider 'openai-compatible' needs base_url");
        expect_error("model:\n  base_url: https://evil.example.com/v1\n",
                     "seed.yaml:2:13: model.base_url: the endpoint of provider 'openrouter' is fixed in code; "
                     "base_url is only for openai-compatible");
        expect_error("model:\n  provider: anthropic\n  base_url: http://x/\n",
                     "seed.yaml:3:13: model.base_url: the endpoint of provider 'anthropic' is fixed in code; "
                     "base_url is only for openai-compatible");
        expect_error("model:\n  provider: openai\n  api_key_env: GITHUB_TOKEN\n",
                     "seed.yaml:3:16: model.api_key_env: provider 'openai' reads its key from a fixed variable; "
                     "api_key_env is only for openai-compatible");
        expect_error("model:\n  provider: openai-compatible\n  base_url: ftp://x/\n",
                     "seed.yaml:3:13: model.base_url: 'ftp://x/' is not an http:// or https:// URL");
        expect_error("model:\n  provider: openai-compatible\n  base_url: http:///v1\n",
                     "seed.yaml:3:13: model.base_url: 'http:///v1' has no host");
        expect_error("model:\n  provider: openai-compatible\n  base_url: https://me:hunter2@x.example/v1\n",
                     "seed.yaml:3:13: model.base_url: must not contain credentials (keys come from the environment)");
        expect_error("model:\n  provider: openai-compatible\n  base_url: http://x/\n  api_key_env: 1KEY\n",
                     "seed.yaml:4:16: model.api_key_env: '1KEY' is not an environment variable name");
        expect_error("model:\n  provider: openai-compatible\n  base_url: http://x/\n  api_key_env: SEED_OWNER_PASSWORD\n",
                     "seed.yaml:4:16: model.api_key_env: 'SEED_OWNER_PASSWORD': SEED_* variables are the kernel's "
                     "own and are never sent to a model");
        expect_error("model:\n  name: 'a b'\n",
                     "seed.yaml:2:9: model.name: 'a b' is not a model name (at most 256 characters, no spaces)");
        expect_error("model:\n  name: \"\"\n", "seed.yaml:2:9: model.name: must not be empty");
}

static void test_error_server(void **state) {
        expect_error("server:\n  addr: 127.0.0.1\n",
                     "seed.yaml:2:9: server.addr: '127.0.0.1': missing port (expected HOST:PORT or [IPv6]:PORT)");
        expect_error("server:\n  addr: localhost:70000\n",
                     "seed.yaml:2:9: server.addr: 'localhost:70000': the port is out of range (1-65535)");
        expect_error("server:\n  addr: \"::1:8080\"\n",
                     "seed.yaml:2:9: server.addr: '::1:8080': an IPv6 address needs brackets, like [::1]:8080");
        expect_error("server:\n  addr: '[::1]'\n",
                     "seed.yaml:2:9: server.addr: '[::1]': missing port (expected HOST:PORT or [IPv6]:PORT)");
        expect_error("server:\n  addr: ':8080'\n",
                     "seed.yaml:2:9: server.addr: ':8080': missing host (expected HOST:PORT or [IPv6]:PORT)");
        expect_error("server:\n  allowed_hosts: [good.example, 'http://x.com']\n",
                     "seed.yaml:2:33: server.allowed_hosts[1]: 'http://x.com' is not a plain host name "
                     "(no scheme, port, path or wildcard)");
        expect_error("server:\n  allowed_hosts:\n    - x.com:80\n",
                     "seed.yaml:3:7: server.allowed_hosts[0]: 'x.com:80' is not a plain host name "
                     "(no scheme, port, path or wildcard)");
        expect_error("server:\n  allowed_hosts: ['*.x.com']\n",
                     "seed.yaml:2:19: server.allowed_hosts[0]: '*.x.com' is not a plain host name "
                     "(no scheme, port, path or wildcard)");
        expect_error("server:\n  allowed_hosts: [-x.com]\n",
                     "seed.yaml:2:19: server.allowed_hosts[0]: '-x.com' is not a plain host name "
                     "(no scheme, port, path or wildcard)");
        expect_error("server:\n  allowed_hosts: [x.com.]\n",
                     "seed.yaml:2:19: server.allowed_hosts[0]: 'x.com.' is not a plain host name "
                     "(no scheme, port, path or wildcard)");
}

static void test_error_evolvable(void **state) {
        expect_error("kernel:\n  evolvable: [/etc/]\n",
                     "seed.yaml:2:15: kernel.evolvable[0]: '/etc/' must be relative to the Seed's folder, not absolute");
        expect_error("kernel:\n  evolvable:\n    - organism/\n    - organism/../kernel/\n",
                     "seed.yaml:4:7: kernel.evolvable[1]: 'organism/../kernel/' must not contain '..'");
        expect_error("kernel:\n  evolvable: ['..']\n",
                     "seed.yaml:2:15: kernel.evolvable[0]: '..' must not contain '..'");
        expect_error("kernel:\n  evolvable: [a../]\n",
                     "seed.yaml:2:15: kernel.evolvable[0]: 'a../' must not contain '..'");
        expect_error("kernel:\n  evolvable: ['']\n", "seed.yaml:2:15: kernel.evolvable[0]: '' must not be empty");
        expect_error("kernel:\n  evolvable: [organism]\n",
                     "seed.yaml:2:15: kernel.evolvable[0]: 'organism' must end with '/' "
                     "(evolvable entries are directories)");
        expect_error("kernel:\n  evolvable: [./]\n",
                     "seed.yaml:2:15: kernel.evolvable[0]: './' must not contain '.' or hidden components");
        expect_error("kernel:\n  evolvable: [.git/]\n",
                     "seed.yaml:2:15: kernel.evolvable[0]: '.git/' must not contain '.' or hidden components");
        expect_error("kernel:\n  evolvable: [a//b/]\n",
                     "seed.yaml:2:15: kernel.evolvable[0]: 'a//b/' has an empty path component");
        expect_error("kernel:\n  evolvable: ['a b/']\n",
                     "seed.yaml:2:15: kernel.evolvable[0]: 'a b/' may hold only letters, digits, '.', '_', '-' and '/'");
        /* At most 64 entries. */
        char text[2048] = "kernel:\n  evolvable: [";
        for (int i = 0; i < 65; i++)
                snprintf(text + strlen(text), sizeof(text) - strlen(text), "%sd%d/", i ? ", " : "", i);
        strcat(text, "]\n");
        expect_error(text, "seed.yaml:2:14: kernel.evolvable: more than 64 entries");
}

static void test_secrets_not_echoed(void **state) {
        struct cfg *c = NULL;
        char *err = NULL;
        const char *yaml = "database:\n  url: \"postgres://u@h/db?x=s3cret\\x01\"\n";
        assert_int_equal(cfg_parse(yaml, strlen(yaml), "seed.yaml", &c, &err), -EINVAL);
        assert_string_equal(err, "seed.yaml:2:8: database.url: must not contain control characters");
        assert_null(strstr(err, "s3cret"));
        free(err);
        /* A password in database.url would be committed to git: refused. */
        static const char *const with_password[] = {
                "database:\n  url: postgres://u:s3cret@h/db\n",
                "database:\n  url: \"host=h user=u password=s3cret\"\n",
                "database:\n  url: postgresql://h/db?PASSWORD=s3cret\n",
        };
        for (size_t i = 0; i < ARRAY_SIZE(with_password); i++) {
                err = NULL;
                assert_int_equal(cfg_parse(with_password[i], strlen(with_password[i]), "seed.yaml", &c, &err),
                                 -EINVAL);
                assert_non_null(strstr(err, "database.url: must not contain a password"));
                assert_null(strstr(err, "s3cret"));
                free(err);
        }
        const char *no_password = "database:\n  url: postgres://u@h:5432/db?sslmode=require\n";
        assert_int_equal(cfg_parse(no_password, strlen(no_password), "seed.yaml", &c, NULL), 0);
        cfg_free(c);
        /* Out-params are written only on success; ret_error may be NULL. */
        c = (struct cfg *)0x1;
        assert_int_equal(cfg_parse("foo: 1", 6, "x.yaml", &c, NULL), -EINVAL);
        assert_ptr_equal(c, (struct cfg *)0x1);
}

static void test_split_addr(void **state) {
        static const struct {
                const char *addr, *host;
                int port;
        } good[] = {
                {"127.0.0.1:8080", "127.0.0.1", 8080},
                {"localhost:1", "localhost", 1},
                {"0.0.0.0:65535", "0.0.0.0", 65535},
                {"[::1]:8080", "::1", 8080},
                {"[2001:db8::42]:443", "2001:db8::42", 443},
                {"seed.example.com:80", "seed.example.com", 80},
        };
        static const char *const bad[] = {
                "127.0.0.1", "127.0.0.1:", ":8080", "[::1]", "[::1]:", "[::1]8080", "[::1:80", "::1:80",
                "host:0", "host:65536", "host:-1", "host:+80", "host:08080", "host:80a", "host:999999",
                "[]:80", "[zz]:80", "[127.0.0.1]:80", "ho st:80", "host/x:80", "", "[::1]:80:1",
        };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                char *host = NULL;
                int port = 0;
                assert_int_equal(cfg_split_addr(good[i].addr, &host, &port), 0);
                assert_string_equal(host, good[i].host);
                assert_int_equal(port, good[i].port);
                free(host);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *host = NULL;
                int port = -7;
                if (cfg_split_addr(bad[i], &host, &port) != -EINVAL)
                        print_error("accepted '%s'\n", bad[i]);
                assert_int_equal(cfg_split_addr(bad[i], &host, &port), -EINVAL);
                assert_null(host);
                assert_int_equal(port, -7);
        }
        assert_int_equal(cfg_split_addr(NULL, NULL, NULL), -EINVAL);
}

/* ---- cfg_scalars_parse: knowledge/self.yaml, SKILL.md front matter ---- */

static char *sv[4];

static void sv_free(void) {
        for (size_t i = 0; i < ARRAY_SIZE(sv); i++) {
                free(sv[i]);
                sv[i] = NULL;
        }
}

static int scalars_len(const char *text, size_t len, char **ret_err) {
        static const char *const keys[] = {"a", "b", "c", "d", NULL};
        sv_free();
        return cfg_scalars_parse(text, len, "self.yaml", keys, sv, ret_err);
}

static void scalars_ok(const char *text) {
        char *err = NULL;
        int r = scalars_len(text, strlen(text), &err);
        if (r < 0)
                fail_msg("unexpected error: %s", err ? err : "(none)");
        assert_null(err);
}

static void scalars_error(const char *text, const char *expected) {
        char *err = NULL;
        assert_int_equal(scalars_len(text, strlen(text), &err), -EINVAL);
        assert_non_null(err);
        assert_string_equal(err, expected);
        free(err);
        for (size_t i = 0; i < ARRAY_SIZE(sv); i++)
                assert_null(sv[i]);
}

static void test_scalars(void **state) {
        scalars_ok("a: plain value # comment\nb: \"q \\\"x\\\" \\u00e9\\n\"\nc: 'it''s'\nd: x#y\n");
        assert_string_equal(sv[0], "plain value");
        assert_string_equal(sv[1], "q \"x\" \xc3\xa9\n");
        assert_string_equal(sv[2], "it's");
        assert_string_equal(sv[3], "x#y");
        /* Blocks (their final newline dropped); lists and maps are other values, skipped. */
        scalars_ok("a: |\n  one\n    two\n\n  three\nb: >-\n  folded\n  text\nc: [1, 2]\n"
                   "nest:\n  d: no\nlist:\n  - d: no\ncapabilities: []\n");
        assert_string_equal(sv[0], "one\n  two\n\nthree");
        assert_string_equal(sv[1], "folded text");
        assert_null(sv[2]);
        assert_null(sv[3]);
        /* Null, NUL, CRLF lines; an empty document has no values. */
        scalars_ok("a: win\r\nb: \"\\u0000\"\r\nc:\r\nd: ~\r\n");
        assert_string_equal(sv[0], "win");
        assert_null(sv[1]);
        assert_null(sv[2]);
        assert_null(sv[3]);
        scalars_ok("# only a comment\n");
        assert_null(sv[0]);
        /* A value over the cap is dropped; a text over the cap is refused. */
        size_t big = CFG_SCALAR_VALUE_MAX + 10;
        _cleanup_free_ char *t = malloc(big + 16);
        memcpy(t, "a: ", 3);
        memset(t + 3, 'x', big);
        strcpy(t + 3 + big, "\nb: y\n");
        scalars_ok(t);
        assert_null(sv[0]);
        assert_string_equal(sv[1], "y");
        char *err = NULL;
        assert_int_equal(scalars_len("a: b", CFG_SCALARS_MAX + 1, &err), -EINVAL);
        assert_string_equal(err, "self.yaml:1:1: larger than 64 KiB (65537 bytes)");
        free(err);
        /* As strict as seed.yaml, with the same file:line:col errors. */
        scalars_error("a: first\na: second\n", "self.yaml:2:1: duplicate key 'a' (first at line 1)");
        scalars_error("a: &x 1\nb: *x\n", "self.yaml:1:4: anchors and aliases are not allowed");
        scalars_error("c: !!str x\n", "self.yaml:1:4: tags are not allowed");
        scalars_error("- a\n- b\n", "self.yaml:1:1: expected a mapping of keys, got a sequence");
        scalars_error("a: b\n---\nc: d\n", "self.yaml:2:1: more than one YAML document");
        sv_free();
}

static void test_scalars_bad_text(void **state) {
        char *err = NULL;
        assert_int_equal(scalars_len("a: \"open\nb: x\n", 14, &err), -EINVAL);
        assert_non_null(strstr(err, "self.yaml:"));
        free(err);
        err = NULL;
        assert_int_equal(scalars_len("a: \xff\xfe\n", 7, &err), -EINVAL);
        assert_non_null(strstr(err, "not valid UTF-8 YAML"));
        free(err);
        sv_free();
}

static char *vals[8];

static void free_vals(void) {
        for (size_t i = 0; i < ARRAY_SIZE(vals); i++) {
                free(vals[i]);
                vals[i] = NULL;
        }
}

/* cfg_front_matter: the "---" fence, then cfg_scalars_parse. */
static void test_front_matter(void **state) {
        static const char *const keys[] = {"name", "description", NULL};
        const char *ok = "---\r\nname: x\ndescription: 'y'\n---\nbody: no\n";
        assert_int_equal(cfg_front_matter(ok, strlen(ok), "SKILL.md", keys, vals, NULL), 0);
        assert_string_equal(vals[0], "x");
        assert_string_equal(vals[1], "y");
        free_vals();
        const char *none = "# title\n---\nname: x\n---\n";
        assert_int_equal(cfg_front_matter(none, strlen(none), "SKILL.md", keys, vals, NULL), -ENOENT);
        const char *open = "---\nname: x\n";
        assert_int_equal(cfg_front_matter(open, strlen(open), "SKILL.md", keys, vals, NULL), -ENOENT);
        assert_null(vals[0]);
        /* The front matter is YAML, read by config's one reader: its errors say where. */
        const char *bad = "---\nname: x\nname: y\n---\n";
        char *err = NULL;
        assert_int_equal(cfg_front_matter(bad, strlen(bad), "skills/a/SKILL.md", keys, vals, &err), -EINVAL);
        assert_string_equal(err, "skills/a/SKILL.md:2:1: duplicate key 'name' (first at line 1)");
        free(err);
        assert_null(vals[0]);
}

/* model.provider accepts exactly the rows of kernel/model's providers table. */
static void test_every_provider_accepted(void **state) {
        size_t n;
        const struct model_provider *p = model_providers(&n);
        for (size_t i = 0; i < n; i++) {
                char yaml[256];
                snprintf(yaml, sizeof yaml, "model:\n  provider: %s\n%s", p[i].name,
                         p[i].endpoint ? "" : "  base_url: http://127.0.0.1:9/v1\n");
                struct cfg *c = parse_ok(yaml);
                assert_string_equal(c->model.provider, p[i].name);
                cfg_free(c);
        }
}

static void test_repo_seed_yaml_is_defaults(void **state) {
        struct cfg *c = NULL, *d = NULL;
        char *err = NULL;
        int r = cfg_load(SEED_SOURCE_ROOT "/seed.yaml", &c, &err);
        if (r < 0)
                print_error("%s\n", err);
        assert_int_equal(r, 0);
        assert_defaults(c);
        assert_int_equal(cfg_new_default(&d), 0);
        assert_true(cfg_equal(c, d));
        cfg_free(c);
        cfg_free(d);

        /* Every key is written out: drop any one line holding a key and the
         * result must still parse, so each line is a known key. */
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(read_file(SEED_SOURCE_ROOT "/seed.yaml", 1 << 20, &text, &len), 0);
        static const char *const keys[] = {
                "name:", "addr:", "allowed_hosts:", "provider:", "base_url:", "api_key_env:",
                "max_tokens:", "context_chars:", "url:", "driver:", "build:", "test:", "run:", "port:", "health:",
                "migrations:", "max_repair_attempts:", "max_agent_turns:", "command_timeout_seconds:", "model_wait_seconds:",
                "safe:", "review:", "dangerous:", "require_plan_approval:", "require_apply_approval:",
                "evolvable:", "server:", "model:", "database:", "sandbox:", "organism:",
                "evolution:", "permissions:", "kernel:",
        };
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                char needle[64];
                snprintf(needle, sizeof(needle), "\n%s", keys[i]);
                char needle2[64];
                snprintf(needle2, sizeof(needle2), "\n  %s", keys[i]);
                if (!strstr(text, needle) && !strstr(text, needle2))
                        print_error("seed.yaml does not write out '%s'\n", keys[i]);
                assert_true(strstr(text, needle) || strstr(text, needle2));
        }
        free(text);
}

static void test_load(void **state) {
        struct cfg *c = NULL;
        char *err = NULL;
        assert_int_equal(cfg_load("/nonexistent/seed.yaml", &c, &err), -ENOENT);
        assert_null(c);
        assert_string_equal(err, "/nonexistent/seed.yaml: cannot read: No such file or directory");
        free(err);

        char dir[] = "/tmp/test-config-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char path[256];
        snprintf(path, sizeof(path), "%s/seed.yaml", dir);

        const char *text = "name: loaded\nserver:\n  bogus: 1\n";
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0600), 0);
        err = NULL;
        assert_int_equal(cfg_load(path, &c, &err), -EINVAL);
        char want[512];
        snprintf(want, sizeof(want), "%s:3:3: unknown key 'bogus' in server", path);
        assert_string_equal(err, want);
        free(err);

        text = "name: loaded\n";
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0600), 0);
        assert_int_equal(cfg_load(path, &c, NULL), 0);
        assert_string_equal(c->name, "loaded");
        cfg_free(c);

        size_t big = 1024 * 1024 + 10;
        char *blob = malloc(big);
        assert_non_null(blob);
        memset(blob, '\n', big);
        assert_int_equal(write_file_atomic(path, blob, big, 0600), 0);
        free(blob);
        err = NULL;
        c = NULL;
        assert_int_equal(cfg_load(path, &c, &err), -EINVAL);
        assert_null(c);
        snprintf(want, sizeof(want), "%s:1:1: larger than 1 MiB", path);
        assert_string_equal(err, want);
        free(err);

        assert_int_equal(rm_rf(dir), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_empty_gives_defaults),
                cmocka_unit_test(test_full_file),
                cmocka_unit_test(test_partial_and_flow),
                cmocka_unit_test(test_control_host),
        cmocka_unit_test(test_error_messages),
                cmocka_unit_test(test_error_duplicates),
                cmocka_unit_test(test_error_yaml_level),
                cmocka_unit_test(test_error_model),
                cmocka_unit_test(test_error_server),
                cmocka_unit_test(test_error_evolvable),
                cmocka_unit_test(test_secrets_not_echoed),
                cmocka_unit_test(test_split_addr),
                cmocka_unit_test(test_scalars),
                cmocka_unit_test(test_scalars_bad_text),
                cmocka_unit_test(test_front_matter),
                cmocka_unit_test(test_every_provider_accepted),
                cmocka_unit_test(test_repo_seed_yaml_is_defaults),
                cmocka_unit_test(test_load),
                cmocka_unit_test(test_egress_registries),
                cmocka_unit_test(test_spend_prices),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
