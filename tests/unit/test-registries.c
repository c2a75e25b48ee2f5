/* Unit tests for kernel/registries: strict registry URLs, the package
 * clients' outputs as they print them, the list's limits and its print. No
 * client is run here (integration: the kernel's start). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "registries/registries.h"

static void host_ok(const char *url, const char *want) {
        char *host = NULL, *err = NULL;
        int r = registries_host_from_url(url, &host, &err);
        if (r < 0)
                print_error("%s: %s\n", url, err ? err : "?");
        assert_int_equal(r, 0);
        assert_string_equal(host, want);
        assert_null(err);
        free(host);
}

static void host_refused(const char *url, const char *why) {
        char *host = NULL, *err = NULL;
        assert_int_equal(registries_host_from_url(url, &host, &err), -EINVAL);
        assert_null(host);
        assert_non_null(err);
        if (!strstr(err, why))
                print_error("%s: '%s' does not say '%s'\n", url, err, why);
        assert_non_null(strstr(err, why));
        assert_null(strstr(err, "s3cret")); /* credentials are never echoed */
        free(err);
}

static void test_urls(void **state) {
        host_ok("https://registry.npmjs.org/", "registry.npmjs.org");
        host_ok("HTTPS://Mirror.Example.COM./simple", "mirror.example.com");
        host_ok("https://proxy.example.org:443/go?x#y", "proxy.example.org");
        host_ok("https://pypi.example.net", "pypi.example.net");
        host_refused("http://registry.example.com/", "not an https:// URL");
        host_refused("ftp://x.example.com/", "not an https:// URL");
        host_refused("registry.example.com", "not an https:// URL");
        host_refused("https://user:s3cret@registry.example.com/", "credentials");
        host_refused("https://registry.example.com:8443/", "port other than 443");
        host_refused("https://registry.example.com:443x/", "port other than 443");
        host_refused("https://10.1.2.3/simple", "IP address");
        host_refused("https://[::1]/", "IP address");
        host_refused("https://localhost/", "internal name");
        host_refused("https:///path", "no host");
        host_refused("https://a.example.com/ x", "space or control");
        host_refused("", "empty");
        char *big = malloc(REGISTRIES_URL_MAX + 2);
        memset(big, 'a', REGISTRIES_URL_MAX + 1);
        memcpy(big, "https://", 8);
        big[REGISTRIES_URL_MAX + 1] = 0;
        host_refused(big, "longer than");
        free(big);
}

static bool has(const struct registries *r, const char *host, const char *from) {
        for (size_t i = 0; i < r->n; i++)
                if (streq(r->v[i].host, host))
                        return !from || strstr(r->v[i].from, from);
        return false;
}

static bool noted(const struct registries *r, const char *what) {
        for (char **n = r->notes; n && *n; n++)
                if (strstr(*n, what))
                        return true;
        return false;
}

static void test_npm(void **state) {
        struct registries r = {0};
        assert_int_equal(registries_parse(&r, "npm", "npm warn config something odd\nhttps://registry.npmjs.org/\n"), 1);
        assert_true(has(&r, "registry.npmjs.org", "npm config get registry"));
        assert_int_equal(registries_parse(&r, "npm", "http://insecure.example.com/\n"), 0);
        assert_true(noted(&r, "not an https:// URL"));
        assert_int_equal(registries_parse(&r, "npm", "undefined\n"), 0);
        assert_int_equal(r.n, 1);
        registries_done(&r);
}

static void test_pip(void **state) {
        struct registries r = {0};
        const char *out = ":env:.cert='/etc/ssl/certs/ca-certificates.crt'\n"
                          ":env:.extra-index-url='https://a.example.com/x https://b.example.com/y'\n"
                          ":env:.find-links='/opt/wheels'\n"
                          ":env:.index-url='https://mirror.example.org/simple'\n"
                          "global.index-url=\"https://mirror.example.org/simple\"\n"
                          "site.extra-index-url='https://u:s3cret@c.example.com/z https://10.0.0.1/'\n";
        assert_int_equal(registries_parse(&r, "pip", out), 3);
        assert_true(has(&r, "mirror.example.org", "index-url"));
        assert_true(has(&r, "a.example.com", "extra-index-url"));
        assert_true(has(&r, "b.example.com", NULL));
        assert_false(has(&r, "c.example.com", NULL));
        assert_true(noted(&r, "credentials"));
        assert_true(noted(&r, "IP address"));
        for (char **n = r.notes; *n; n++)
                assert_null(strstr(*n, "s3cret"));
        registries_done(&r);

        /* pip's own default, as pip names it. */
        assert_int_equal(registries_parse(&r, "pip-default", "https://pypi.example.org/simple files.example.org\n"), 2);
        assert_true(has(&r, "pypi.example.org", "pip's default index"));
        assert_true(has(&r, "files.example.org", "pip's default index"));
        assert_int_equal(registries_parse(&r, "pip-default", "https://pypi2.example.org/simple 127.0.0.1\n"), 1);
        assert_false(has(&r, "127.0.0.1", NULL));
        assert_int_equal(registries_parse(&r, "pip-default", "garbage\n"), 0);
        registries_done(&r);
}

static void test_go(void **state) {
        struct registries r = {0};
        assert_int_equal(registries_parse(&r, "go",
                                          "{\n\t\"GOPROXY\": \"https://proxy.example.com,https://p2.example.com|direct\",\n"
                                          "\t\"GOSUMDB\": \"sum.example.com\"\n}\n"),
                         3);
        assert_true(has(&r, "proxy.example.com", "GOPROXY"));
        assert_true(has(&r, "p2.example.com", "GOPROXY"));
        assert_true(has(&r, "sum.example.com", "GOSUMDB"));
        registries_done(&r);
        assert_int_equal(registries_parse(&r, "go",
                                          "{\"GOPROXY\": \"off\", \"GOSUMDB\": \"sum.example.com+abc123 https://sumproxy.example.net/x\"}"),
                         1);
        assert_true(has(&r, "sumproxy.example.net", "GOSUMDB"));
        assert_false(has(&r, "sum.example.com", NULL));
        registries_done(&r);
        assert_int_equal(registries_parse(&r, "go", "{\"GOPROXY\": \"direct\", \"GOSUMDB\": \"off\"}"), 0);
        assert_int_equal(r.n, 0);
        assert_int_equal(registries_parse(&r, "go", "go: not a JSON answer"), 0);
        assert_true(noted(&r, "no JSON"));
        assert_int_equal(registries_parse(&r, "go", "{\"GOPROXY\": \"file:///srv/mods\"}"), 0);
        assert_true(noted(&r, "not an https:// URL"));
        registries_done(&r);
        assert_int_equal(registries_parse(&r, "nope", ""), -EINVAL);
}

static void test_list_limits_and_print(void **state) {
        struct registries r = {0};
        assert_int_equal(registries_add(&r, "a.example.com", "one"), 1);
        assert_int_equal(registries_add(&r, "a.example.com", "two"), 0); /* once, its first source */
        assert_int_equal(r.n, 1);
        assert_string_equal(r.v[0].from, "one");
        assert_int_equal(registries_add(&r, "10.0.0.1", "three"), -EINVAL);
        for (int i = 1; i < REGISTRIES_MAX; i++) {
                char h[64];
                snprintf(h, sizeof h, "h%d.example.com", i);
                assert_int_equal(registries_add(&r, h, "many"), 1);
        }
        assert_int_equal(registries_add(&r, "one-too-many.example.com", "many"), -E2BIG);
        assert_int_equal(r.n, REGISTRIES_MAX);
        assert_true(noted(&r, "more than"));
        char **hosts = NULL;
        assert_int_equal(registries_hosts(&r, &hosts), 0);
        assert_int_equal(strv_length(hosts), REGISTRIES_MAX);
        strv_free(hosts);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        assert_int_equal(registries_print(&r, f), 0);
        fclose(f);
        assert_non_null(strstr(text, "a.example.com"));
        assert_non_null(strstr(text, "(one)"));
        assert_non_null(strstr(text, "note: "));
        free(text);
        registries_done(&r);
}

/* Discovery with no client on PATH: each is skipped and said so; the
 * configured hosts are still there. */
static void test_discover_without_clients(void **state) {
        char *old = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
        setenv("PATH", "/nonexistent", 1);
        char *const configured[] = {"registry.example.com", NULL};
        struct registries r = {0};
        assert_int_equal(registries_discover(configured, &r), 0);
        if (old)
                setenv("PATH", old, 1);
        free(old);
        assert_int_equal(r.n, 1);
        assert_true(has(&r, "registry.example.com", "seed.yaml egress.registries"));
        assert_true(noted(&r, "npm: 'npm' is not installed (skipped)"));
        assert_true(noted(&r, "go: 'go' is not installed (skipped)"));
        registries_done(&r);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_urls),
                cmocka_unit_test(test_npm),
                cmocka_unit_test(test_pip),
                cmocka_unit_test(test_go),
                cmocka_unit_test(test_list_limits_and_print),
                cmocka_unit_test(test_discover_without_clients),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
