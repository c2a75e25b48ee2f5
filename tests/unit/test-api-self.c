/* test-api-self.c — the control plane's read-only routes (api/self.c):
 * self.yaml and SKILL.md front matter as the routes show them, accent and URL
 * checks, and the files read beneath a temporary Seed folder (symlinks, big
 * files, escapes and secrets refused). No database: GET usage is covered by
 * the browser suite. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/api.h"
#include "api/self.h"
#include "base/fileio.h"
#include "fsx/fsx.h"

#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/seed-info-XXXXXX";

static void put(const char *rel, const char *text) {
        _cleanup_free_ char *p = path_join(dir, rel);
        _cleanup_free_ char *parent = strdup(p);
        *strrchr(parent, '/') = 0;
        assert_int_equal(mkdir_p(parent, 0755), 0);
        assert_int_equal(write_file_atomic(p, text, strlen(text), 0644), 0);
}

static void link_to(const char *target, const char *rel) {
        _cleanup_free_ char *p = path_join(dir, rel);
        unlink(p);
        assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state) {
        assert_non_null(mkdtemp(dir));
        put("seed.yaml", "name: infotest\nmodel:\n  provider: openai-compatible\n  name: scripted\n"
                         "  base_url: https://models.example:8443/v1?key=hunter3\n"
                         "  api_key_env: MY_KEY\ndatabase:\n  url: postgres://seed@db.hunter4.example/seed\n");
        put("knowledge/self.yaml", "# who\nslug: infotest\nname: \"Fern\"\ntagline: Grows  # a comment\n"
                                   "accent: '#3F7D4E'\npurpose: |\n  Keep notes.\n  Two lines.\n"
                                   "capabilities: []\n");
        put("knowledge/logo.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"/>");
        put("knowledge/README.md", "# Hello\n\n<script>alert(1)</script>\n");
        put("knowledge/decisions/0001-start.md", "We start small.\n");
        put("skills/notes/SKILL.md", "---\nname: Notes\ndescription: How to keep notes\n---\n# Notes\n");
        put("skills/bare/SKILL.md", "# no front matter\n");
        put("outside-secret.txt", "hunter5\n");
        link_to("../outside-secret.txt", "knowledge/leak.md");
        return 0;
}

static int teardown(void **state) {
        assert_int_equal(rm_rf(dir), 0);
        return 0;
}

static void test_accent_and_url(void **state) {
        assert_true(api_self_accent_valid("#3f7d4e"));
        assert_true(api_self_accent_valid("#ABC"));
        assert_false(api_self_accent_valid("#3f7d4"));
        assert_false(api_self_accent_valid("red"));
        assert_false(api_self_accent_valid("#3f7d4g"));
        assert_false(api_self_accent_valid("#fff;background:url(x)"));
        assert_false(api_self_accent_valid(NULL));
        char *u = NULL;
        assert_int_equal(api_self_redact_url("https://user:pw@host:8443/v1?key=k#f", &u), 0);
        assert_string_equal(u, "https://host:8443/v1");
        free(u);
        assert_int_equal(api_self_redact_url("http://a@b@host/p", &u), 0);
        assert_string_equal(u, "http://host/p");
        free(u);
        assert_int_equal(api_self_redact_url("", &u), 0);
        assert_string_equal(u, "");
        free(u);
}

static json_t *parsed(int r, char **jp) {
        char *json = *jp;
        assert_int_equal(r, 0);
        json_t *o = json_loads(json, 0, NULL);
        free(json);
        assert_non_null(o);
        return o;
}

static const char *str(json_t *o, const char *key) {
        return json_string_value(json_object_get(o, key));
}

static void test_identity(void **state) {
        char *json = NULL;
        json_t *o = parsed(api_self_identity_json(dir, &json), &json);
        assert_string_equal(str(o, "name"), "Fern");
        assert_string_equal(str(o, "slug"), "infotest");
        assert_string_equal(str(o, "seed"), "infotest");
        assert_string_equal(str(o, "tagline"), "Grows");
        assert_string_equal(str(o, "accent"), "#3F7D4E");
        assert_string_equal(str(o, "purpose"), "Keep notes.\nTwo lines.");
        assert_string_equal(str(o, "logo"), "/_seed/logo");
        json_decref(o);
        /* A bad accent is left out; a self.yaml that is a link is not read. */
        put("knowledge/self.yaml", "name: X\naccent: \"#fff; color: red\"\n");
        o = parsed(api_self_identity_json(dir, &json), &json);
        assert_string_equal(str(o, "name"), "X");
        assert_true(json_is_null(json_object_get(o, "accent")));
        json_decref(o);
        put("elsewhere.yaml", "name: Linked\n");
        link_to("../elsewhere.yaml", "knowledge/self.yaml");
        link_to("../outside-secret.txt", "knowledge/logo.svg");
        o = parsed(api_self_identity_json(dir, &json), &json);
        assert_true(json_is_null(json_object_get(o, "name")));
        assert_true(json_is_null(json_object_get(o, "logo")));
        assert_string_equal(str(o, "seed"), "infotest");
        json_decref(o);
        put("knowledge/self.yaml", "name: Fern\n");
        put("knowledge/logo.svg", "<svg/>");
}

static void test_knowledge(void **state) {
        char *json = NULL;
        json_t *o = parsed(api_self_knowledge_json(dir, &json), &json);
        json_t *files = json_object_get(o, "files"), *f;
        size_t i;
        bool saw_decision = false, saw_link = false;
        json_array_foreach(files, i, f) {
                if (streq(str(f, "path"), "decisions/0001-start.md"))
                        saw_decision = streq(str(f, "type"), "file");
                if (streq(str(f, "path"), "leak.md"))
                        saw_link = streq(str(f, "type"), "symlink");
        }
        assert_true(saw_decision);
        assert_true(saw_link);
        assert_false(json_is_true(json_object_get(o, "truncated")));
        json_decref(o);

        o = parsed(api_self_knowledge_file_json(dir, "./decisions//0001-start.md", &json), &json);
        assert_string_equal(str(o, "path"), "decisions/0001-start.md");
        assert_string_equal(str(o, "content"), "We start small.\n");
        json_decref(o);
        o = parsed(api_self_knowledge_file_json(dir, "README.md", &json), &json);
        assert_non_null(strstr(str(o, "content"), "<script>")); /* as text: the UI never renders it as HTML */
        json_decref(o);

        json = NULL;
        assert_int_equal(api_self_knowledge_file_json(dir, "leak.md", &json), -ELOOP);
        assert_int_equal(api_self_knowledge_file_json(dir, "../seed.yaml", &json), -EINVAL);
        assert_int_equal(api_self_knowledge_file_json(dir, "/etc/passwd", &json), -EINVAL);
        assert_int_equal(api_self_knowledge_file_json(dir, "missing.md", &json), -ENOENT);
        assert_int_equal(api_self_knowledge_file_json(dir, "decisions", &json), -EISDIR);
        assert_int_equal(api_self_knowledge_file_json(dir, ".", &json), -EISDIR);
        assert_int_equal(api_self_knowledge_file_json(dir, ".seed/secrets", &json), -EPERM);
        assert_int_equal(api_self_knowledge_file_json(dir, "x/.GIT./config", &json), -EPERM);
        assert_null(json);

        _cleanup_free_ char *big = malloc(API_SELF_FILE_MAX + 2);
        memset(big, 'x', API_SELF_FILE_MAX + 1);
        big[API_SELF_FILE_MAX + 1] = 0;
        put("knowledge/big.txt", big);
        assert_int_equal(api_self_knowledge_file_json(dir, "big.txt", &json), -EFBIG);
        put("knowledge/bin.dat", "\xff\xfe\x01");
        o = parsed(api_self_knowledge_file_json(dir, "bin.dat", &json), &json);
        assert_true(json_is_null(json_object_get(o, "content")));
        assert_int_equal(json_integer_value(json_object_get(o, "size")), 3);
        json_decref(o);
}

static void test_skills(void **state) {
        char *json = NULL;
        json_t *o = parsed(api_self_skills_json(dir, &json), &json);
        json_t *skills = json_object_get(o, "skills");
        assert_int_equal(json_array_size(skills), 2);
        json_t *bare = json_array_get(skills, 0), *notes = json_array_get(skills, 1);
        assert_string_equal(str(bare, "name"), "bare");
        assert_string_equal(str(bare, "problem"), "no SKILL.md front matter");
        assert_string_equal(str(notes, "title"), "Notes");
        assert_string_equal(str(notes, "description"), "How to keep notes");
        json_decref(o);
        o = parsed(api_self_skill_json(dir, "notes", &json), &json);
        assert_string_equal(str(o, "path"), "skills/notes/SKILL.md");
        assert_non_null(strstr(str(o, "content"), "# Notes"));
        assert_string_equal(str(o, "description"), "How to keep notes");
        json_decref(o);
        json = NULL;
        assert_int_equal(api_self_skill_json(dir, "..", &json), -EINVAL);
        assert_int_equal(api_self_skill_json(dir, "a/b", &json), -EINVAL);
        assert_int_equal(api_self_skill_json(dir, ".git", &json), -EINVAL);
        assert_int_equal(api_self_skill_json(dir, "missing", &json), -ENOENT);
        assert_null(json);
}

static void test_settings_hold_no_secret(void **state) {
        char *json = NULL;
        assert_int_equal(api_self_settings_json(dir, &json), 0);
        assert_null(strstr(json, "hunter"));
        assert_null(strstr(json, "postgres:"));
        json_t *o = parsed(0, &json);
        assert_string_equal(str(o, "name"), "infotest");
        json_t *m = json_object_get(o, "model");
        assert_string_equal(str(m, "base_url"), "https://models.example:8443/v1");
        assert_string_equal(str(m, "api_key_env"), "MY_KEY");
        assert_true(json_is_true(json_object_get(json_object_get(o, "database"), "external")));
        assert_null(json_object_get(json_object_get(o, "database"), "url"));
        assert_string_equal(str(json_object_get(o, "permissions"), "dangerous"), "ask");
        assert_int_equal(json_array_size(json_object_get(json_object_get(o, "kernel"), "evolvable")), 3);
        json_decref(o);
}

/* The handlers, as ctl calls them through api_routes. */
static int call(const char *pattern, const char *param, const char *query, char **json) {
        struct api *api = NULL;
        assert_int_equal(api_new(&(struct api_config){.seed_dir = dir, .kdb = (struct db *)1}, &api), 0);
        const struct ctl_api_route *r = api_routes;
        while (r->pattern && !(streq(r->method, "GET") && streq(r->pattern, pattern)))
                r++;
        assert_non_null(r->pattern);
        const struct ctl_api_call c = {.method = "GET", .path = pattern, .param = param, .query = query, .body = ""};
        int status = 0;
        *json = NULL;
        assert_int_equal(r->handler(api, &c, &status, json), 0);
        if (!*json)
                fail_msg("%s ? %s: %d without a body", pattern, query ? query : "", status);
        api_free(api);
        return status;
}

static void test_handlers(void **state) {
        char *json;
        assert_int_equal(call("/_seed/api/identity", NULL, NULL, &json), 200);
        free(json);
        assert_int_equal(call("/_seed/api/knowledge", NULL, NULL, &json), 200);
        free(json);
        assert_int_equal(call("/_seed/api/knowledge", NULL, "path=decisions%2F0001-start.md", &json), 200);
        assert_non_null(strstr(json, "We start small."));
        free(json);
        assert_int_equal(call("/_seed/api/knowledge", NULL, "x=1&path=%2e%2e%2Fseed.yaml", &json), 400);
        free(json);
        assert_int_equal(call("/_seed/api/knowledge", NULL, "path=a%00b", &json), 400);
        free(json);
        assert_int_equal(call("/_seed/api/knowledge", NULL, "path=a%2", &json), 400);
        free(json);
        assert_int_equal(call("/_seed/api/knowledge", NULL, "path=leak.md", &json), 403);
        assert_null(strstr(json, "hunter"));
        free(json);
        assert_int_equal(call("/_seed/api/knowledge", NULL, "path=nope.md", &json), 404);
        free(json);
        /* Off-limits names (fsx refuses them: -EPERM) are the caller's
         * mistake, not the server's: 403, never a 500 (found by
         * fuzz-knowledge). */
        assert_int_equal(call("/_seed/api/knowledge", NULL, "path=.seed", &json), 403);
        free(json);
        assert_int_equal(call("/_seed/api/knowledge", NULL, "path=a%2F.git%2Fconfig", &json), 403);
        free(json);
        assert_int_equal(call("/_seed/api/knowledge", NULL, "path=README.md%2Fx", &json), 404);
        free(json);
        _cleanup_free_ char *q = malloc(FSX_PATH_MAX + 16);
        strcpy(q, "path=");
        memset(q + 5, 'a', FSX_PATH_MAX + 1);
        q[5 + FSX_PATH_MAX + 1] = 0;
        assert_int_equal(call("/_seed/api/knowledge", NULL, q, &json), 400);
        free(json);
        assert_int_equal(call("/_seed/api/knowledge", NULL, "path=big.txt", &json), 413);
        free(json);
        assert_int_equal(call("/_seed/api/skills", NULL, NULL, &json), 200);
        free(json);
        assert_int_equal(call("/_seed/api/skills/*", "notes", NULL, &json), 200);
        free(json);
        assert_int_equal(call("/_seed/api/skills/*", "..", NULL, &json), 400);
        free(json);
        assert_int_equal(call("/_seed/api/settings", NULL, NULL, &json), 200);
        assert_null(strstr(json, "hunter"));
        free(json);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_accent_and_url),
                cmocka_unit_test(test_identity),
                cmocka_unit_test(test_knowledge),
                cmocka_unit_test(test_skills),
                cmocka_unit_test(test_settings_hold_no_secret),
                cmocka_unit_test(test_handlers),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
