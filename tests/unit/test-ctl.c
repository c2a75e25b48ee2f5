/* Unit tests of the control plane's pure parts: guards, cookies and tokens,
 * the proxy's header policy and chunked decoder, pages and escaping, the
 * per-client connection count, and reading the logo (in a temp dir). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/crypto.h"
#include "base/fileio.h"
#include "ctl/badge.h"
#include "ctl/conns.h"
#include "ctl/cookie.h"
#include "ctl/fast.h"
#include "ctl/front.h"
#include "ctl/ctl.h"
#include "ctl/guard.h"
#include "ctl/http.h"
#include "ctl/inject.h"
#include "ctl/limit.h"
#include "ctl/listen.h"
#include "ctl/logo.h"
#include "ctl/own-addrs.h"
#include "ctl/owner.h"
#include "ctl/pages.h"
#include "ctl/proxy-policy.h"
#include "ctl/session-cache.h"
#include "ctl/upstream-pool.h"
#include "fsx/fsx.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

static const char COOKIE64[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/* ---- Host allowlist ---- */

static void test_host_allowed_defaults(void **state) {
        static const char *const ok[] = {
                "localhost", "localhost:8080", "LOCALHOST:80", "127.0.0.1", "127.0.0.1:8080",
                "[::1]", "[::1]:8080", "foo.localhost", "a.b-c.localhost:1234", "Seed.LocalHost",
                "organism.localhost:8080",
        };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                if (!ctl_host_allowed(ok[i], NULL))
                        fail_msg("refused %s", ok[i]);
        }
}

static void test_host_refused(void **state) {
        static const char *const bad[] = {
                "", "evil.com", "evil.com:8080", "127.0.0.1.evil.com", "127.0.0.1.nip.io",
                "localhost.evil.com", "localhost.evil.com:8080", "127.0.0.2", "0.0.0.0", "[::2]",
                "[::1", "::1", "[::1]x", "[::1]:", "localhost:", "localhost:0", "localhost:99999",
                "localhost:80:80", "localhost:8o", "local host", ".localhost", "a..localhost",
                "-x.localhost:", "localhost.", "x_y.localhost", "evil.com/localhost",
                "evil.com#.localhost", "evil.com?.localhost", "user@localhost", "10.0.0.1",
                "[::ffff:127.0.0.1]", "seed.example.com",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (ctl_host_allowed(bad[i], NULL))
                        fail_msg("allowed %s", bad[i]);
        assert_false(ctl_host_allowed(NULL, NULL));
}

static void test_host_allowed_extra(void **state) {
        char *extra[] = {"seed.example.com", "*.corp.test", "[fd00::1]", NULL};
        assert_true(ctl_host_allowed("seed.example.com", extra));
        assert_true(ctl_host_allowed("SEED.example.com:443", extra));
        assert_true(ctl_host_allowed("a.corp.test", extra));
        assert_true(ctl_host_allowed("a.b.corp.test:8080", extra));
        assert_true(ctl_host_allowed("[fd00::1]:8080", extra));
        assert_true(ctl_host_allowed("localhost", extra));
        assert_false(ctl_host_allowed("corp.test", extra));
        assert_false(ctl_host_allowed("evilcorp.test", extra));
        assert_false(ctl_host_allowed("evilseed.example.com", extra));
        assert_false(ctl_host_allowed("seed.example.com.evil.com", extra));
        assert_false(ctl_host_allowed("example.com", extra));
}

static void test_host_organism(void **state) {
        assert_true(ctl_host_is("seed.localhost:8080", "seed.localhost"));
        assert_true(ctl_host_is("SEED.localhost", "seed.localhost"));
        assert_false(ctl_host_is("seed.localhost.evil.com", "seed.localhost"));
        assert_false(ctl_host_is("x.seed.localhost", "seed.localhost"));
        assert_false(ctl_host_is("seed.localhost:99999", "seed.localhost"));
        assert_false(ctl_host_is("seed.localhost:8080", ""));
        assert_false(ctl_host_is(NULL, "seed.localhost"));
        assert_true(ctl_host_is_organism("organism.localhost"));
        assert_true(ctl_host_is_organism("organism.localhost:8080"));
        assert_true(ctl_host_is_organism("Organism.LOCALHOST:1"));
        assert_true(ctl_host_is_organism("admin.organism.localhost"));
        assert_false(ctl_host_is_organism("localhost"));
        assert_false(ctl_host_is_organism("myorganism.localhost"));
        assert_false(ctl_host_is_organism("organism.localhost.evil.com"));
        assert_false(ctl_host_is_organism(NULL));
}

/* Admin screens are framed only where the control plane has a localhost
 * origin of its own, on the port the browser used. */
static void test_admin_origin(void **state) {
        assert_true(ctl_admin_screens_on("seed.localhost"));
        assert_true(ctl_admin_screens_on("control.seed.localhost"));
        assert_true(ctl_admin_screens_on("localhost"));
        assert_false(ctl_admin_screens_on(NULL));
        assert_false(ctl_admin_screens_on(""));                   /* the same-origin fallback */
        assert_false(ctl_admin_screens_on("seed.example.com"));   /* a hosted name */
        assert_false(ctl_admin_screens_on("seed.localhost.evil.com"));
        assert_false(ctl_admin_screens_on("organism.localhost")); /* never the admin origin itself */
        assert_false(ctl_admin_screens_on("x.organism.localhost"));

        char *o = NULL;
        assert_int_equal(ctl_origin_on_port_of(CTL_ADMIN_HOST, "seed.localhost:8080", &o), 0);
        assert_string_equal(o, "http://organism.localhost:8080");
        free(o);
        assert_int_equal(ctl_origin_on_port_of("seed.localhost", "organism.localhost", &o), 0);
        assert_string_equal(o, "http://seed.localhost");
        free(o);
        assert_int_equal(ctl_origin_on_port_of("seed.localhost", "[::1]:9", &o), 0);
        assert_string_equal(o, "http://seed.localhost:9");
        free(o);
        o = NULL;
        static const char *const bad[] = {"", "a b", "seed.localhost:x", "seed.localhost:1:2", "[zz]:1",
                                          "seed.localhost:99999", "a/b:1"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_int_equal(ctl_origin_on_port_of("seed.localhost", bad[i], &o), -EINVAL);
        assert_int_equal(ctl_origin_on_port_of("seed.localhost", NULL, &o), -EINVAL);
        assert_null(o);
}

/* ---- Fetch Metadata, same origin, JSON ---- */

static void test_fetch_nav(void **state) {
        assert_int_equal(ctl_fetch_nav("document", "navigate", "none"), CTL_NAV_OK);
        assert_int_equal(ctl_fetch_nav("document", "navigate", NULL), CTL_NAV_OK);
        assert_int_equal(ctl_fetch_nav(NULL, NULL, NULL), CTL_NAV_MISSING);
        assert_int_equal(ctl_fetch_nav("empty", "cors", "same-origin"), CTL_NAV_REFUSED);
        assert_int_equal(ctl_fetch_nav("iframe", "navigate", "same-origin"), CTL_NAV_REFUSED);
        assert_int_equal(ctl_fetch_nav("document", "no-cors", "same-origin"), CTL_NAV_REFUSED);
        assert_int_equal(ctl_fetch_nav(NULL, NULL, "same-origin"), CTL_NAV_REFUSED);
        assert_int_equal(ctl_fetch_nav("document", NULL, NULL), CTL_NAV_REFUSED);
        assert_int_equal(ctl_fetch_nav("Document", "Navigate", NULL), CTL_NAV_REFUSED);
}

static void test_same_origin(void **state) {
        const char *host = "localhost:8080";
        assert_int_equal(ctl_check_same_origin("same-origin", "http://localhost:8080", host, false), 0);
        assert_int_equal(ctl_check_same_origin("same-origin", "http://LOCALHOST:8080", host, false), 0);
        assert_int_equal(ctl_check_same_origin("same-origin", NULL, host, false), 0);
        assert_int_equal(ctl_check_same_origin(NULL, NULL, host, true), 0);
        assert_int_equal(ctl_check_same_origin(NULL, "http://localhost:8080", host, true), 0);
        assert_int_equal(ctl_check_same_origin(NULL, NULL, host, false), -EPERM);
        assert_int_equal(ctl_check_same_origin("cross-site", NULL, host, false), -EPERM);
        assert_int_equal(ctl_check_same_origin("same-site", NULL, host, false), -EPERM);
        assert_int_equal(ctl_check_same_origin("none", NULL, host, false), -EPERM);
        assert_int_equal(ctl_check_same_origin("cross-site", NULL, host, true), -EPERM);
        assert_int_equal(ctl_check_same_origin("same-origin", "http://localhost:8081", host, false), -EPERM);
        assert_int_equal(ctl_check_same_origin("same-origin", "https://localhost:8080", host, false), -EPERM);
        assert_int_equal(ctl_check_same_origin("same-origin", "null", host, false), -EPERM);
        assert_int_equal(ctl_check_same_origin("same-origin", "http://evil.com", host, false), -EPERM);
        assert_int_equal(ctl_check_same_origin(NULL, "http://evil.com", host, true), -EPERM);
        assert_int_equal(ctl_check_same_origin("same-origin", "http://localhost:8080.evil.com", host, false), -EPERM);
}

static void test_content_type_and_methods(void **state) {
        assert_true(ctl_content_type_is_json("application/json"));
        assert_true(ctl_content_type_is_json("application/json; charset=utf-8"));
        assert_true(ctl_content_type_is_json("Application/JSON;charset=UTF-8"));
        assert_false(ctl_content_type_is_json(NULL));
        assert_false(ctl_content_type_is_json(""));
        assert_false(ctl_content_type_is_json("application/x-www-form-urlencoded"));
        assert_false(ctl_content_type_is_json("multipart/form-data; boundary=x"));
        assert_false(ctl_content_type_is_json("text/plain"));
        assert_false(ctl_content_type_is_json("application/jsonp"));
        assert_false(ctl_content_type_is_json("application/json+evil"));
        assert_false(ctl_method_changes_state("GET"));
        assert_false(ctl_method_changes_state("HEAD"));
        assert_false(ctl_method_changes_state("OPTIONS"));
        assert_true(ctl_method_changes_state("POST"));
        assert_true(ctl_method_changes_state("PUT"));
        assert_true(ctl_method_changes_state("PATCH"));
        assert_true(ctl_method_changes_state("DELETE"));
}

static void test_path_classify(void **state) {
        assert_int_equal(ctl_path_classify("/"), CTL_PATH_ORGANISM);
        assert_int_equal(ctl_path_classify("/todos/1"), CTL_PATH_ORGANISM);
        assert_int_equal(ctl_path_classify("/_seedling"), CTL_PATH_ORGANISM);
        assert_int_equal(ctl_path_classify("/x/_seed"), CTL_PATH_ORGANISM);
        assert_int_equal(ctl_path_classify("/a%20b"), CTL_PATH_ORGANISM);
        assert_int_equal(ctl_path_classify("/_seed"), CTL_PATH_SEED);
        assert_int_equal(ctl_path_classify("/_seed/"), CTL_PATH_SEED);
        assert_int_equal(ctl_path_classify("/_seed/api/status"), CTL_PATH_SEED);
        assert_int_equal(ctl_path_classify("/%5Fseed/"), -EINVAL);
        assert_int_equal(ctl_path_classify("/%5fseed"), -EINVAL);
        assert_int_equal(ctl_path_classify("/_seed%2Fapi"), -EINVAL);
        assert_int_equal(ctl_path_classify("/x/../_seed/api"), -EINVAL);
        assert_int_equal(ctl_path_classify("/x/%2e%2e/y"), -EINVAL);
        assert_int_equal(ctl_path_classify("/./x"), -EINVAL);
        assert_int_equal(ctl_path_classify("/%00"), -EINVAL);
        assert_int_equal(ctl_path_classify("/%zz"), -EINVAL);
        assert_int_equal(ctl_path_classify("/%4"), -EINVAL);
        assert_int_equal(ctl_path_classify("x"), -EINVAL);
        assert_int_equal(ctl_path_classify("http://evil/_seed"), -EINVAL);
        assert_int_equal(ctl_path_classify("*"), -EINVAL);
}

static void test_target_clean(void **state) {
        assert_true(ctl_target_is_clean("/a/b?c=d&e=%20"));
        assert_false(ctl_target_is_clean(""));
        assert_false(ctl_target_is_clean(NULL));
        assert_false(ctl_target_is_clean("/a b"));
        assert_false(ctl_target_is_clean("/a\tb"));
        assert_false(ctl_target_is_clean("/a\x01"));
        assert_false(ctl_target_is_clean("/a\x7f"));
        assert_false(ctl_target_is_clean("/\xc3\xa9"));
}

static void test_query(void **state) {
        char *v = NULL;
        assert_int_equal(ctl_query_get("t=abc&lines=20", "lines", &v), 0);
        assert_string_equal(v, "20");
        free(v);
        assert_int_equal(ctl_query_get("a=1&name=ker%6Eel+x", "name", &v), 0);
        assert_string_equal(v, "kernel x");
        free(v);
        assert_int_equal(ctl_query_get("flag&x=", "flag", &v), 0);
        assert_string_equal(v, "");
        free(v);
        assert_int_equal(ctl_query_get("a=1", "b", &v), -ENOENT);
        assert_int_equal(ctl_query_get(NULL, "b", &v), -ENOENT);
        assert_int_equal(ctl_query_get("b=%zz", "b", &v), -EINVAL);

        assert_true(ctl_query_has_token("token=abc"));
        assert_true(ctl_query_has_token("a=1&X-Seed-Token=abc"));
        assert_true(ctl_query_has_token("seed_token=1"));
        assert_true(ctl_query_has_token("%74oken=1"));
        assert_false(ctl_query_has_token("name=kernel&lines=3"));
        assert_false(ctl_query_has_token("tokens=1"));
        assert_false(ctl_query_has_token(NULL));
}

/* ---- cookies and tokens ---- */

static void test_cookie_header(void **state) {
        char *h = NULL;
        assert_int_equal(ctl_cookie_header("seed_1234abcd", COOKIE64, 2592000, true, &h), 0);
        char want[256];
        snprintf(want, sizeof want,
                 "seed_1234abcd=%s; Path=/_seed; HttpOnly; SameSite=Strict; Max-Age=2592000", COOKIE64);
        assert_string_equal(h, want);
        assert_null(strstr(h, "Secure"));
        assert_null(strstr(h, "Domain")); /* host-only */
        free(h);
        assert_int_equal(ctl_cookie_header("seed_1234abcd", "", 0, false, &h), 0);
        assert_string_equal(h, "seed_1234abcd=; Path=/_seed; HttpOnly; SameSite=Lax; Max-Age=0");
        free(h);
}

static void test_cookie_foreign(void **state) {
        char **v = NULL;
        assert_int_equal(ctl_cookie_foreign("a=1; seed_1234abcd=x; b=2;a=3; noval; bad name=4; c\"=5; =6; "
                                            " d = 7",
                                            "seed_1234abcd", 10, &v),
                         0);
        assert_int_equal(strv_length(v), 3);
        assert_string_equal(v[0], "a");
        assert_string_equal(v[1], "b");
        assert_string_equal(v[2], "d");
        strv_free(v);
        /* The preview's and the badge's cookies are the kernel's too. */
        assert_int_equal(ctl_cookie_foreign("x_preview=1; x_badge=2; x_badgex=3; xx=4; x_previe=5", "x", 10, &v), 0);
        assert_int_equal(strv_length(v), 3);
        assert_string_equal(v[0], "x_badgex");
        assert_string_equal(v[1], "xx");
        assert_string_equal(v[2], "x_previe");
        strv_free(v);
        assert_int_equal(ctl_cookie_foreign("a=1; b=2; c=3", "x", 2, &v), 0);
        assert_int_equal(strv_length(v), 2); /* at most max */
        strv_free(v);
        assert_int_equal(ctl_cookie_foreign(NULL, "x", 2, &v), 0);
        assert_int_equal(strv_length(v), 0);
        strv_free(v);
        char big[CTL_FOREIGN_NAME_MAX + 8];
        memset(big, 'n', sizeof big - 3);
        memcpy(big + sizeof big - 3, "=1", 3);
        assert_int_equal(ctl_cookie_foreign(big, "x", 2, &v), 0);
        assert_int_equal(strv_length(v), 0); /* too long to echo */
        strv_free(v);
}

static void test_cookie_name(void **state) {
        char a[32], b[32], c[32];
        ctl_cookie_name("key-one", a);
        ctl_cookie_name("key-one", b);
        ctl_cookie_name("key-two", c);
        assert_string_equal(a, b);
        assert_string_not_equal(a, c);
        assert_int_equal(strlen(a), 13);
        assert_true(startswith(a, "seed_"));
        assert_true(ctl_is_hex(a + 5, 8));
}

static void test_api_token(void **state) {
        char t[65], u[65], v[65];
        /* RFC-style known vector for HMAC-SHA-256. */
        ctl_api_token("key", "The quick brown fox jumps over the lazy dog", t);
        assert_string_equal(t, "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");
        ctl_api_token("session-key", COOKIE64, t);
        ctl_api_token("session-key", "1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", u);
        ctl_api_token("session-key2", COOKIE64, v);
        assert_string_not_equal(t, u);
        assert_string_not_equal(t, v);
        assert_true(ctl_is_hex(t, 64));
        assert_string_not_equal(t, COOKIE64);
}

static void test_cookie_values(void **state) {
        char hdr[512];
        char **v = NULL;
        snprintf(hdr, sizeof hdr, "other=1; seed_ab=short; seed_ab=%s;seed_abc=%s; seed_ab=%s",
                 COOKIE64, COOKIE64, "f123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
        assert_int_equal(ctl_cookie_values(hdr, "seed_ab", 4, &v), 0);
        assert_int_equal(strv_length(v), 2);
        assert_string_equal(v[0], COOKIE64);
        assert_true(startswith(v[1], "f1234"));
        strv_free(v);
        assert_int_equal(ctl_cookie_values(hdr, "seed_ab", 1, &v), 0);
        assert_int_equal(strv_length(v), 1);
        strv_free(v);
        assert_int_equal(ctl_cookie_values("x=1", "seed_ab", 4, &v), 0);
        assert_int_equal(strv_length(v), 0);
        strv_free(v);
        /* Upper-case hex is not ours. */
        snprintf(hdr, sizeof hdr, "seed_ab=0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef");
        assert_int_equal(ctl_cookie_values(hdr, "seed_ab", 4, &v), 0);
        assert_int_equal(strv_length(v), 0);
        strv_free(v);
}

static void test_cookie_strip(void **state) {
        char *s = NULL;
        assert_int_equal(ctl_cookie_strip("a=1; seed_ab=xyz; b=2", "seed_ab", &s), 0);
        assert_string_equal(s, "a=1; b=2");
        free(s);
        assert_int_equal(ctl_cookie_strip("seed_ab=xyz;seed_ab=w", "seed_ab", &s), 0);
        assert_null(s);
        assert_int_equal(ctl_cookie_strip("seed_abc=1; xseed_ab=2", "seed_ab", &s), 0);
        assert_string_equal(s, "seed_abc=1; xseed_ab=2");
        free(s);
}

/* ---- header lists ---- */

/* Names and values live in blocks of text: those already added stay where
 * they are (and intact) while later ones fill new blocks, small or larger
 * than a block; CTL_MAX_HEADERS still holds. */
static void test_hdrs_text_blocks(void **state) {
        struct ctl_hdrs h = {0};
        char big[5000];
        memset(big, 'v', sizeof big - 1);
        big[sizeof big - 1] = 0;
        assert_int_equal(ctl_hdrs_add(&h, "First", "1"), 0);
        const char *first_name = h.v[0].name, *first_value = h.v[0].value;
        assert_int_equal(ctl_hdrs_add(&h, "Big", big), 0);
        assert_int_equal(ctl_hdrs_addn(&h, "X-Cut: rest", 5, "abcdef", 3), 0); /* no NUL needed */
        assert_int_equal(ctl_hdrs_add(&h, "Empty", NULL), 0);
        for (int i = 0; i < 100; i++) {
                char name[32], value[64];
                snprintf(name, sizeof name, "X-%d", i);
                snprintf(value, sizeof value, "value number %d", i);
                assert_int_equal(ctl_hdrs_add(&h, name, value), 0);
        }
        assert_ptr_equal(h.v[0].name, first_name);
        assert_ptr_equal(h.v[0].value, first_value);
        assert_string_equal(ctl_hdrs_get(&h, "first"), "1");
        assert_string_equal(ctl_hdrs_get(&h, "BIG"), big);
        assert_string_equal(ctl_hdrs_get(&h, "X-Cut"), "abc");
        assert_string_equal(ctl_hdrs_get(&h, "Empty"), "");
        assert_string_equal(ctl_hdrs_get(&h, "X-99"), "value number 99");
        assert_string_equal(ctl_hdrs_get(&h, "X-0"), "value number 0");
        assert_int_equal(h.n, 104);
        while (h.n < CTL_MAX_HEADERS)
                assert_int_equal(ctl_hdrs_add(&h, "X-More", "1"), 0);
        assert_int_equal(ctl_hdrs_add(&h, "X-Over", "1"), -E2BIG);
        assert_int_equal(ctl_hdrs_count(&h, "X-More"), CTL_MAX_HEADERS - 104);
        ctl_hdrs_free(&h);
        assert_int_equal(h.n, 0);
        assert_null(h.v);
        /* Empty again, and usable. */
        assert_int_equal(ctl_hdrs_add(&h, "Again", "yes"), 0);
        assert_string_equal(ctl_hdrs_get(&h, "again"), "yes");
        ctl_hdrs_free(&h);
}

/* ---- proxy: request headers ---- */

static void test_proxy_request_head(void **state) {
        struct ctl_hdrs in = {0};
        char cookie[512];
        snprintf(cookie, sizeof cookie, "theme=dark; seed_ab=%s; seed_ab_badge=%s; lang=en", COOKIE64, COOKIE64);
        const char *h[][2] = {
                {"Host", "localhost:8080"},
                {"Accept", "text/html"},
                {"Cookie", cookie},
                {"X-Seed-Token", "secret-token"},
                {"Authorization", "Bearer cli-secret"},
                {"Connection", "keep-alive, X-Hop"},
                {"X-Hop", "1"},
                {"Keep-Alive", "timeout=5"},
                {"Proxy-Authorization", "Basic abc"},
                {"TE", "trailers"},
                {"Trailer", "X"},
                {"Upgrade", "websocket"},
                {"Transfer-Encoding", "chunked"},
                {"Content-Length", "999"},
                {"X-Forwarded-For", "6.6.6.6"},
                {"Forwarded", "for=6.6.6.6"},
                {"Expect", "100-continue"},
                {"Content-Type", "application/json"},
                {"X-App", "kept"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(h); i++)
                assert_int_equal(ctl_hdrs_add(&in, h[i][0], h[i][1]), 0);
        struct ctl_proxy_req req = {
                .method = "POST", .target = "/todos?x=1", .host = "localhost:8080",
                .client_ip = "127.0.0.1", .cookie_name = "seed_ab", .cli_token = "cli-secret",
                .body = CTL_BODY_LENGTH, .body_len = 12,
        };
        struct buf out = BUF_INIT(1 << 20);
        assert_int_equal(ctl_proxy_request_head(&in, &req, &out), 0);
        assert_string_equal(out.data,
                            "POST /todos?x=1 HTTP/1.1\r\n"
                            "Host: localhost:8080\r\n"
                            "Accept: text/html\r\n"
                            "Cookie: theme=dark; lang=en\r\n"
                            "Content-Type: application/json\r\n"
                            "X-App: kept\r\n"
                            "X-Forwarded-For: 127.0.0.1\r\n"
                            "X-Forwarded-Proto: http\r\n"
                            "X-Forwarded-Host: localhost:8080\r\n"
                            "Content-Length: 12\r\n"
                            "Connection: close\r\n\r\n");
        buf_free(&out);
        ctl_hdrs_free(&in);
}

static void test_proxy_request_keeps_other_auth(void **state) {
        struct ctl_hdrs in = {0};
        assert_int_equal(ctl_hdrs_add(&in, "Authorization", "Bearer app-token"), 0);
        assert_int_equal(ctl_hdrs_add(&in, "Cookie", "seed_ab=1"), 0);
        struct ctl_proxy_req req = {.method = "GET", .target = "/", .host = "127.0.0.1:9",
                                    .client_ip = "::1", .cookie_name = "seed_ab",
                                    .cli_token = "cli-secret", .body = CTL_BODY_CHUNKED};
        struct buf out = BUF_INIT(1 << 20);
        assert_int_equal(ctl_proxy_request_head(&in, &req, &out), 0);
        assert_non_null(strstr(out.data, "Authorization: Bearer app-token\r\n"));
        assert_null(strstr(out.data, "Cookie"));
        assert_non_null(strstr(out.data, "Transfer-Encoding: chunked\r\n"));
        assert_null(strstr(out.data, "Content-Length"));
        buf_free(&out);
        ctl_hdrs_free(&in);

        assert_true(ctl_proxy_drop_request_header("Authorization", "bearer cli-secret", NULL, "cli-secret"));
        assert_false(ctl_proxy_drop_request_header("Authorization", "Bearer cli-secret2", NULL, "cli-secret"));
        assert_false(ctl_proxy_drop_request_header("Authorization", "Bearer ", NULL, ""));
        assert_true(ctl_proxy_drop_request_header("x-seed-token", "a", NULL, NULL));
        assert_true(ctl_proxy_drop_request_header("Proxy-Connection", "a", NULL, NULL));
        assert_true(ctl_proxy_drop_request_header("X-Evil", "a\r\nInjected: 1", NULL, NULL));
        assert_false(ctl_proxy_drop_request_header("Accept-Language", "en", "close", NULL));
}

/* The CLI token is the CLI's however the header spaces it: trailing or
 * doubled whitespace does not let it through to the organism. */
static void test_proxy_drops_cli_token_with_whitespace(void **state) {
        static const char *const spaced[] = {
                "Bearer cli-secret ", "Bearer cli-secret\t", "Bearer  cli-secret  ", "BEARER\tcli-secret",
                "bearer cli-secret \t ",
        };
        for (size_t i = 0; i < ARRAY_SIZE(spaced); i++)
                if (!ctl_proxy_drop_request_header("Authorization", spaced[i], NULL, "cli-secret"))
                        fail_msg("forwarded the CLI token in '%s'", spaced[i]);
        assert_false(ctl_proxy_drop_request_header("Authorization", "Bearer cli-secre", NULL, "cli-secret"));
        assert_false(ctl_proxy_drop_request_header("Authorization", "Bearercli-secret", NULL, "cli-secret"));
        assert_false(ctl_proxy_drop_request_header("Authorization", "Basic cli-secret", NULL, "cli-secret"));
}

static void test_auth_bearer(void **state) {
        const char *t = NULL;
        size_t n = 0;
        assert_int_equal(ctl_auth_bearer("Bearer abc", &t, &n), 0);
        assert_int_equal(n, 3);
        assert_memory_equal(t, "abc", 3);
        assert_int_equal(ctl_auth_bearer("bearer \t abc \t", &t, &n), 0);
        assert_int_equal(n, 3);
        assert_memory_equal(t, "abc", 3);
        assert_int_equal(ctl_auth_bearer("Basic dXNlcjpwYXNz", &t, &n), -ENOENT);
        assert_int_equal(ctl_auth_bearer("Digest username=\"a\"", &t, &n), -ENOENT);
        assert_int_equal(ctl_auth_bearer("Bearerabc", &t, &n), -ENOENT);
        assert_int_equal(ctl_auth_bearer(NULL, &t, &n), -ENOENT);
        assert_int_equal(ctl_auth_bearer("Bearer", &t, &n), -EINVAL);
        assert_int_equal(ctl_auth_bearer("Bearer   ", &t, &n), -EINVAL);
        assert_true(ctl_token_eq("abc", 3, "abc"));
        assert_false(ctl_token_eq("abc", 2, "abc"));
        assert_false(ctl_token_eq("abcd", 4, "abc"));
        assert_false(ctl_token_eq("abd", 3, "abc"));
        assert_true(ctl_token_eq("", 0, ""));
}

/* Set-Cookie names as a browser reads them, and the name it sends back. */
static void test_set_cookie_name(void **state) {
        static const struct {
                const char *value, *name;
        } cases[] = {
                {"a=b", "a"},       {" a =b; Path=/", "a"}, {"\ta\t=b", "a"},  {"=a=b", ""},
                {"a", ""},          {"\"a\"=b", "\"a\""},   {"a b=c", "a b"},  {"a;b=c", ""},
                {"", ""},           {"==", ""},             {"a==b", "a"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                const char *n = NULL;
                size_t len = 99;
                ctl_set_cookie_name(cases[i].value, &n, &len);
                if (len != strlen(cases[i].name) || memcmp(n, cases[i].name, len) != 0)
                        fail_msg("'%s': name '%.*s', want '%s'", cases[i].value, (int)len, n, cases[i].name);
        }
        static const char *const sets[] = {
                "seed_ab=x", " seed_ab\t=x", "=seed_ab=x", " = seed_ab =x; Path=/", "seed_ab", " seed_ab ",
                "=seed_ab", "seed_ab; Path=/", "= seed_ab",
        };
        for (size_t i = 0; i < ARRAY_SIZE(sets); i++)
                if (!ctl_set_cookie_sets(sets[i], "seed_ab"))
                        fail_msg("'%s' would set seed_ab unnoticed", sets[i]);
        static const char *const others[] = {
                "\"seed_ab\"=x", "seed_abc=x", "xseed_ab=x", "=x=seed_ab", "seed_a=b", "=", "", "a=seed_ab",
                "Seed_ab=x",
        };
        for (size_t i = 0; i < ARRAY_SIZE(others); i++)
                if (ctl_set_cookie_sets(others[i], "seed_ab"))
                        fail_msg("'%s' does not set seed_ab", others[i]);
}

/* Header names that are not RFC 9110 tokens are dropped, so a name such as
 * "Transfer-Encoding\t" cannot pass the exact-name checks and reach the
 * organism, which might trim it into a framing header. */
static void test_proxy_drops_non_token_names(void **state) {
        static const char *const bad[] = {
                "Transfer-Encoding\t", "Transfer-Encoding ", " Transfer-Encoding", "Content-Length ",
                "Content-Length\t", "Foo Bar", "X:Y", "X-A:", "", "X\"Y", "X(Y)", "X,Y", "X;Y",
                "X/Y", "X=Y", "X?Y", "X@Y", "X[Y]", "X{Y}", "X\\Y", "X\x7fY", "X\x01Y",
                "X\rY", "X\nY", "X\r\nInjected", "\xc3\x9c" "ber", "X-\xff",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (!ctl_proxy_drop_request_header(bad[i], "v", NULL, NULL))
                        fail_msg("kept the header name \"%s\"", bad[i]);
        static const char *const ok[] = {
                "X-App", "x_app", "Accept", "A", "0", "!#$%&'*+-.^_`|~", "X-App.v2",
        };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
                if (ctl_proxy_drop_request_header(ok[i], "v", NULL, NULL))
                        fail_msg("dropped the header name \"%s\"", ok[i]);

        /* And in the forwarded head: none of them, and no second
         * Transfer-Encoding or Content-Length next to the kernel's own. */
        struct ctl_hdrs in = {0};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_int_equal(ctl_hdrs_add(&in, bad[i], "chunked"), 0);
        assert_int_equal(ctl_hdrs_add(&in, "X-Kept", "1"), 0);
        struct ctl_proxy_req req = {.method = "POST", .target = "/", .host = "localhost",
                                    .client_ip = "127.0.0.1", .cookie_name = "seed_ab",
                                    .body = CTL_BODY_LENGTH, .body_len = 3};
        struct buf out = BUF_INIT(1 << 20);
        assert_int_equal(ctl_proxy_request_head(&in, &req, &out), 0);
        assert_string_equal(out.data,
                            "POST / HTTP/1.1\r\nHost: localhost\r\nX-Kept: 1\r\n"
                            "X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\n"
                            "X-Forwarded-Host: localhost\r\nContent-Length: 3\r\n"
                            "Connection: close\r\n\r\n");
        buf_free(&out);
        ctl_hdrs_free(&in);
}

/* Whether every CR and LF in s is part of a CRLF line ending, and s has
 * exactly lines of them. */
static bool crlf_lines_only(const char *s, size_t lines) {
        size_t n = 0;
        for (const char *p = s; *p; p++) {
                if (*p == '\r' && p[1] != '\n')
                        return false;
                if (*p == '\n' && (p == s || p[-1] != '\r'))
                        return false;
                n += *p == '\n';
        }
        return n == lines;
}

/* Header values carrying CR, LF or other controls never reach the organism:
 * such a header is dropped whole (it would otherwise inject a header or a
 * second request). */
static void test_proxy_drops_control_chars_in_values(void **state) {
        static const char *const bad[] = {
                "a\r\nX-Seed-Token: forged", "a\nX-Injected: 1", "a\rX-Injected: 1", "\r\n",
                "a\r\n\r\nGET /smuggled HTTP/1.1", "a\x01" "b", "a\x7f" "b", "a\x0b" "b", "a\x0c" "b",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (!ctl_proxy_drop_request_header("X-App", bad[i], NULL, NULL))
                        fail_msg("kept the value #%zu", i);
        assert_false(ctl_proxy_drop_request_header("X-App", "a\tb c \xc3\xa9", NULL, NULL));
        assert_false(ctl_proxy_drop_request_header("X-App", "", NULL, NULL));

        struct ctl_hdrs in = {0};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                assert_int_equal(ctl_hdrs_add(&in, "X-App", bad[i]), 0);
                assert_int_equal(ctl_hdrs_add(&in, "Cookie", bad[i]), 0);
                assert_int_equal(ctl_hdrs_add(&in, "Authorization", bad[i]), 0);
        }
        assert_int_equal(ctl_hdrs_add(&in, "Cookie", "theme=dark\r\nX-Injected: 1; lang=en"), 0);
        assert_int_equal(ctl_hdrs_add(&in, "Accept", "text/html"), 0);
        struct ctl_proxy_req req = {.method = "GET", .target = "/", .host = "localhost",
                                    .client_ip = "::1", .cookie_name = "seed_ab"};
        struct buf out = BUF_INIT(1 << 20);
        assert_int_equal(ctl_proxy_request_head(&in, &req, &out), 0);
        /* Request line, Host, Accept, three X-Forwarded-*, Connection, blank. */
        assert_true(crlf_lines_only(out.data, 8));
        assert_null(strstr(out.data, "Injected"));
        assert_null(strstr(out.data, "forged"));
        assert_null(strstr(out.data, "smuggled"));
        assert_null(strstr(out.data, "X-App"));
        assert_null(strstr(out.data, "Cookie"));
        assert_non_null(strstr(out.data, "\r\nAccept: text/html\r\n"));
        buf_free(&out);
        ctl_hdrs_free(&in);
}

/* ---- proxy: request body framing ---- */

static int framing(const char *const *h, enum ctl_body *ret_body, uint64_t *ret_len) {
        struct ctl_hdrs in = {0};
        for (size_t i = 0; h[i]; i += 2)
                assert_int_equal(ctl_hdrs_add(&in, h[i], h[i + 1]), 0);
        int r = ctl_request_framing(&in, ret_body, ret_len);
        ctl_hdrs_free(&in);
        return r;
}

static void test_request_framing(void **state) {
        enum ctl_body body = -1;
        uint64_t len = 7;
        assert_int_equal(framing((const char *[]){"Accept", "x", NULL}, &body, &len), 0);
        assert_int_equal(body, CTL_BODY_NONE);
        assert_int_equal(len, 0);
        assert_int_equal(framing((const char *[]){"Content-Length", "12", NULL}, &body, &len), 0);
        assert_int_equal(body, CTL_BODY_LENGTH);
        assert_int_equal(len, 12);
        assert_int_equal(framing((const char *[]){"content-length", "0", NULL}, &body, &len), 0);
        assert_int_equal(body, CTL_BODY_LENGTH);
        assert_int_equal(len, 0);
        assert_int_equal(framing((const char *[]){"Content-Length", "007", "Content-Length", "7", NULL},
                                 &body, &len),
                         0);
        assert_int_equal(len, 7);
        assert_int_equal(framing((const char *[]){"Content-Length", "999999999999999999", NULL}, &body, &len), 0);
        assert_int_equal(len, 999999999999999999ULL);
        assert_int_equal(framing((const char *[]){"Transfer-Encoding", "chunked", NULL}, &body, &len), 0);
        assert_int_equal(body, CTL_BODY_CHUNKED);
        assert_int_equal(framing((const char *[]){"TRANSFER-ENCODING", "Chunked", NULL}, &body, &len), 0);
        assert_int_equal(body, CTL_BODY_CHUNKED);

        /* Refused: both, bad or differing lengths, codings but chunked. */
        const char *const *const bad[] = {
                (const char *[]){"Content-Length", "3", "Transfer-Encoding", "chunked", NULL},
                (const char *[]){"Transfer-Encoding", "chunked", "Content-Length", "3", NULL},
                (const char *[]){"transfer-encoding", "chunked", "CONTENT-LENGTH", "0", NULL},
                (const char *[]){"Content-Length", "3", "Content-Length", "4", NULL},
                (const char *[]){"Content-Length", "3", "Content-Length", "x", NULL},
                (const char *[]){"Content-Length", "", NULL},
                (const char *[]){"Content-Length", "+3", NULL},
                (const char *[]){"Content-Length", "-1", NULL},
                (const char *[]){"Content-Length", " 3", NULL},
                (const char *[]){"Content-Length", "3 ", NULL},
                (const char *[]){"Content-Length", "3, 3", NULL},
                (const char *[]){"Content-Length", "0x10", NULL},
                (const char *[]){"Content-Length", "1e3", NULL},
                (const char *[]){"Content-Length", "1234567890123456789", NULL},
                (const char *[]){"Transfer-Encoding", "chunked", "Transfer-Encoding", "chunked", NULL},
                (const char *[]){"Transfer-Encoding", "chunked, gzip", NULL},
                (const char *[]){"Transfer-Encoding", "gzip", NULL},
                (const char *[]){"Transfer-Encoding", "", NULL},
                (const char *[]){"Transfer-Encoding", "chunked\t", NULL},
                (const char *[]){"Transfer-Encoding", "xchunked", NULL},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                body = -1;
                len = 7;
                int r = framing(bad[i], &body, &len);
                if (r != -EBADMSG)
                        fail_msg("case %zu (%s: %s): r=%d", i, bad[i][0], bad[i][1], r);
                assert_int_equal((int)body, -1); /* out-params untouched */
                assert_int_equal(len, 7);
        }
        /* Chunked last after another coding: understood, not supported. */
        assert_int_equal(framing((const char *[]){"Transfer-Encoding", "gzip, chunked", NULL}, &body, &len),
                         -EOPNOTSUPP);
        assert_int_equal(framing((const char *[]){"Transfer-Encoding", "gzip,chunked ", NULL}, &body, &len),
                         -EOPNOTSUPP);
}

/* The organism gets only the kernel's framing, whatever the client sent. */
static void test_proxy_request_head_framing(void **state) {
        struct ctl_hdrs in = {0};
        assert_int_equal(ctl_hdrs_add(&in, "Content-Length", "3"), 0);
        assert_int_equal(ctl_hdrs_add(&in, "Transfer-Encoding", "chunked"), 0);
        assert_int_equal(ctl_hdrs_add(&in, "Connection", "close"), 0);
        struct ctl_proxy_req req = {.method = "POST", .target = "/", .host = "localhost",
                                    .client_ip = "127.0.0.1", .cookie_name = "seed_ab"};
        static const struct {
                enum ctl_body body;
                const char *framing;
        } cases[] = {
                {CTL_BODY_NONE, ""},
                {CTL_BODY_LENGTH, "Content-Length: 30\r\n"},
                {CTL_BODY_CHUNKED, "Transfer-Encoding: chunked\r\n"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                req.body = cases[i].body;
                req.body_len = 30;
                struct buf out = BUF_INIT(1 << 20);
                assert_int_equal(ctl_proxy_request_head(&in, &req, &out), 0);
                char want[512];
                snprintf(want, sizeof want,
                         "POST / HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: 127.0.0.1\r\n"
                         "X-Forwarded-Proto: http\r\nX-Forwarded-Host: localhost\r\n%s"
                         "Connection: close\r\n\r\n",
                         cases[i].framing);
                assert_string_equal(out.data, want);
                buf_free(&out);
        }
        ctl_hdrs_free(&in);
}

/* A request that may be followed by another on its connection says nothing
 * of Connection (HTTP/1.1 keeps it open); any other asks to close. */
static void test_proxy_request_head_keep_alive(void **state) {
        struct ctl_hdrs in = {0};
        assert_int_equal(ctl_hdrs_add(&in, "Connection", "close"), 0); /* the client's own: hop-by-hop */
        struct ctl_proxy_req req = {.method = "GET", .target = "/", .host = "localhost",
                                    .client_ip = "127.0.0.1", .cookie_name = "seed_ab", .keep_alive = true};
        struct buf out = BUF_INIT(1 << 20);
        assert_int_equal(ctl_proxy_request_head(&in, &req, &out), 0);
        assert_string_equal(out.data, "GET / HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: 127.0.0.1\r\n"
                                      "X-Forwarded-Proto: http\r\nX-Forwarded-Host: localhost\r\n\r\n");
        buf_free(&out);
        ctl_hdrs_free(&in);
}

/* Whether the organism's answer leaves its connection open for another. */
static void test_proxy_parse_head_keep_alive(void **state) {
        static const struct {
                const char *head;
                bool head_request, keep_alive;
        } cases[] = {
                {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", false, true},
                {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false, true},
                {"HTTP/1.1 204 No Content\r\n\r\n", false, true},
                {"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true, true},
                {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n", false, false},
                {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: Keep-Alive, CLOSE\r\n\r\n", false, false},
                {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: closed\r\n\r\n", false, true},
                {"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", false, false}, /* ends with the close */
                {"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n", false, false},
                {"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n", false, false},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct ctl_upstream u;
                assert_int_equal(ctl_proxy_parse_head(cases[i].head, strlen(cases[i].head), cases[i].head_request, &u),
                                 0);
                if (u.keep_alive != cases[i].keep_alive)
                        fail_msg("case %zu: keep_alive %d", i, u.keep_alive);
                ctl_upstream_done(&u);
        }
}

/* ---- proxy: the pool of idle upstream connections ---- */

static void pair(int fds[2]) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
}

static void test_upstream_pool(void **state) {
        struct ctl_upool p;
        ctl_upool_init(&p);
        int a[2], b[2], c[2], d[2], fd = -1;
        pair(a);
        pair(b);
        pair(c);
        pair(d);
        assert_int_equal(ctl_upool_take(&p, "/x.sock", &fd), -ENOENT);
        ctl_upool_put(&p, "/x.sock", a[0]);
        ctl_upool_put(&p, "/x.sock", b[0]);
        ctl_upool_put(&p, "/y.sock", c[0]);
        assert_int_equal(ctl_upool_idle(&p), 3);
        /* Keyed by socket: /y's connection only for /y. */
        assert_int_equal(ctl_upool_take(&p, "/y.sock", &fd), 0);
        assert_int_equal(fd, c[0]);
        assert_int_equal(ctl_upool_take(&p, "/y.sock", &fd), -ENOENT);
        close(c[0]);
        /* The peer of the newest closed it: skipped (and closed); the next
         * one is handed out. */
        close(b[1]);
        assert_int_equal(ctl_upool_take(&p, "/x.sock", &fd), 0);
        assert_int_equal(fd, a[0]);
        /* One whose peer sent bytes nobody asked for is never reused. */
        ctl_upool_put(&p, "/x.sock", a[0]);
        assert_int_equal(send(a[1], "HTTP/1.1 200 OK\r\n", 17, 0), 17);
        assert_int_equal(ctl_upool_take(&p, "/x.sock", &fd), -ENOENT);
        assert_int_equal(ctl_upool_idle(&p), 0);
        close(a[1]);
        /* Closed with the pool; put afterwards closes at once. */
        ctl_upool_put(&p, "/x.sock", d[0]);
        ctl_upool_close_all(&p);
        char ch;
        assert_int_equal(recv(d[1], &ch, 1, 0), 0); /* the pool closed its end */
        pair(a);
        ctl_upool_put(&p, "/x.sock", a[0]);
        assert_int_equal(ctl_upool_idle(&p), 0);
        assert_int_equal(recv(a[1], &ch, 1, 0), 0);
        close(a[1]);
        close(d[1]);
        ctl_upool_done(&p);

        /* A watched pool does not look at a connection it hands out: its
         * owner tells it of news, and that connection is closed then. */
        ctl_upool_init(&p);
        ctl_upool_watched(&p);
        pair(a);
        pair(b);
        ctl_upool_put(&p, "/x.sock", a[0]);
        ctl_upool_put(&p, "/x.sock", b[0]);
        assert_int_equal(send(b[1], "x", 1, 0), 1);
        ctl_upool_stirred(&p, b[0]);
        ctl_upool_stirred(&p, 12345); /* not the pool's: nothing */
        assert_int_equal(ctl_upool_idle(&p), 1);
        assert_true(recv(b[1], &ch, 1, 0) <= 0); /* closed (reset: it left a byte unread) */
        assert_int_equal(ctl_upool_take(&p, "/x.sock", &fd), 0);
        assert_int_equal(fd, a[0]);
        close(a[0]);
        close(a[1]);
        close(b[1]);
        ctl_upool_done(&p);
}

/* ---- the session cache ---- */

static void test_session_cache(void **state) {
        struct ctl_session_cache c;
        ctl_session_cache_init(&c);
        char h1[SHA256_HEX_LEN + 1], h2[SHA256_HEX_LEN + 1], id[CTL_SESSION_ID_MAX + 1];
        crypto_sha256_hex("cookie one", 10, h1);
        crypto_sha256_hex("cookie two", 10, h2);
        int64_t t = 1000000;
        assert_int_equal(ctl_session_cache_get(&c, h1, t, id), -ENOENT);
        ctl_session_cache_put(&c, h1, "aa01", t, t + 60000, ctl_session_cache_epoch(&c));
        assert_int_equal(ctl_session_cache_get(&c, h1, t + 1, id), 0);
        assert_string_equal(id, "aa01");
        assert_int_equal(ctl_session_cache_get(&c, h2, t + 1, id), -ENOENT);
        /* Ages out after the TTL (asked of the DB again). */
        assert_int_equal(ctl_session_cache_get(&c, h1, t + CTL_SESSION_CACHE_TTL_MS, id), -ENOENT);
        /* Never past its expiry. */
        ctl_session_cache_put(&c, h1, "aa01", t, t + 5, ctl_session_cache_epoch(&c));
        assert_int_equal(ctl_session_cache_get(&c, h1, t + 4, id), 0);
        assert_int_equal(ctl_session_cache_get(&c, h1, t + 5, id), -ENOENT);
        /* Forgotten at once. */
        ctl_session_cache_put(&c, h1, "aa01", t, t + 60000, ctl_session_cache_epoch(&c));
        ctl_session_cache_put(&c, h2, "bb02", t, t + 60000, ctl_session_cache_epoch(&c));
        ctl_session_cache_forget(&c, "aa01");
        assert_int_equal(ctl_session_cache_get(&c, h1, t + 1, id), -ENOENT);
        assert_int_equal(ctl_session_cache_get(&c, h2, t + 1, id), 0);
        /* A lookup that began before a forget is not kept. */
        uint64_t e = ctl_session_cache_epoch(&c);
        ctl_session_cache_forget(&c, "aa01");
        ctl_session_cache_put(&c, h1, "aa01", t, t + 60000, e);
        assert_int_equal(ctl_session_cache_get(&c, h1, t + 1, id), -ENOENT);
        /* Bounded: more sessions than it holds replace the least recently
         * verified; the newest are kept. */
        for (int i = 0; i < CTL_SESSION_CACHE_SIZE + 10; i++) {
                char h[SHA256_HEX_LEN + 1], n[16];
                snprintf(n, sizeof n, "s%d", i);
                crypto_sha256_hex(n, strlen(n), h);
                ctl_session_cache_put(&c, h, n, t + 10 + i, t + 60000, ctl_session_cache_epoch(&c));
        }
        size_t used = 0;
        for (size_t i = 0; i < CTL_SESSION_CACHE_SIZE; i++)
                used += c.e[i].used;
        assert_int_equal(used, CTL_SESSION_CACHE_SIZE);
        char hl[SHA256_HEX_LEN + 1];
        crypto_sha256_hex("s73", 3, hl);
        assert_int_equal(ctl_session_cache_get(&c, hl, t + 100, id), 0);
        assert_string_equal(id, "s73");
        assert_int_equal(ctl_session_cache_get(&c, h2, t + 100, id), -ENOENT); /* the oldest went */
        ctl_session_cache_done(&c);
}

/* ---- proxy: response head and header policy ---- */

static void test_proxy_parse_head(void **state) {
        struct ctl_upstream u;
        const char *h1 = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 42\r\n\r\n";
        assert_int_equal(ctl_proxy_head_end(h1, strlen(h1)), strlen(h1));
        assert_int_equal(ctl_proxy_head_end(h1, strlen(h1) - 1), 0);
        assert_int_equal(ctl_proxy_parse_head(h1, strlen(h1), false, &u), 0);
        assert_int_equal(u.status, 200);
        assert_int_equal(u.body, CTL_BODY_LENGTH);
        assert_int_equal(u.length, 42);
        assert_string_equal(ctl_hdrs_get(&u.hdrs, "content-type"), "text/html");
        ctl_upstream_done(&u);

        const char *h2 = "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n";
        assert_int_equal(ctl_proxy_parse_head(h2, strlen(h2), false, &u), 0);
        assert_int_equal(u.status, 201);
        assert_int_equal(u.body, CTL_BODY_CHUNKED);
        ctl_upstream_done(&u);

        const char *h3 = "HTTP/1.0 200\r\nX: y\r\n\r\n";
        assert_int_equal(ctl_proxy_parse_head(h3, strlen(h3), false, &u), 0);
        assert_int_equal(u.body, CTL_BODY_CLOSE);
        ctl_upstream_done(&u);
        assert_int_equal(ctl_proxy_parse_head(h1, strlen(h1), true, &u), 0);
        assert_int_equal(u.body, CTL_BODY_NONE);
        ctl_upstream_done(&u);
        const char *h4 = "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n";
        assert_int_equal(ctl_proxy_parse_head(h4, strlen(h4), false, &u), 0);
        assert_int_equal(u.body, CTL_BODY_NONE);
        ctl_upstream_done(&u);

        static const char *const bad[] = {
                "HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n",
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                "HTTP/2 200\r\n\r\n",
                "HTTP/1.1 20 OK\r\n\r\n",
                "HTTP/1.1 600 OK\r\n\r\n",
                "HTTP/1.1 200 OK\nX: y\r\n\r\n",
                "HTTP/1.1 200 OK\r\nBad Name: y\r\n\r\n",
                "HTTP/1.1 200 OK\r\n: y\r\n\r\n",
                "HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n",
                "HTTP/1.1 200 OK\r\n\r\nextra",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (ctl_proxy_parse_head(bad[i], strlen(bad[i]), false, &u) != -EBADMSG)
                        fail_msg("accepted bad head #%zu", i);
}

static void test_proxy_response_policy(void **state) {
        struct ctl_hdrs up = {0}, out = {0};
        const char *h[][2] = {
                {"Content-Type", "text/html"},
                {"Content-Security-Policy", "default-src 'self'"},
                {"Cross-Origin-Opener-Policy", "same-origin"},
                {"Service-Worker-Allowed", "/"},
                {"Set-Cookie", "seed_ab=evil; Path=/_seed"},
                {"Set-Cookie", " seed_ab =evil2"},
                {"Set-Cookie", "app=1; Path=/"},
                {"Set-Cookie", "seed_abc=1"},
                {"Set-Cookie", "=seed_ab=evil3; Path=/_seed"},
                {"Set-Cookie", "seed_ab"},
                {"Set-Cookie", " = seed_ab=evil4"},
                {"Set-Cookie", "\"seed_ab\"=q"},
                {"Set-Cookie", "seed_ab_badge=forged; Path=/_seed/"},
                {"Set-Cookie", "seed_ab_preview=forged"},
                {"Content-Length", "10"},
                {"Transfer-Encoding", "chunked"},
                {"Connection", "close, X-Hop"},
                {"X-Hop", "1"},
                {"Keep-Alive", "timeout=5"},
                {"Clear-Site-Data", "\"cookies\""},
                {"X-App", "kept"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(h); i++)
                assert_int_equal(ctl_hdrs_add(&up, h[i][0], h[i][1]), 0);
        assert_int_equal(ctl_proxy_response_headers(&up, "seed_ab", NULL, false, &out), 0);
        assert_string_equal(ctl_hdrs_get(&out, "Content-Type"), "text/html");
        assert_string_equal(ctl_hdrs_get(&out, "X-App"), "kept");
        assert_int_equal(ctl_hdrs_count(&out, "Cross-Origin-Opener-Policy"), 1);
        assert_string_equal(ctl_hdrs_get(&out, "Cross-Origin-Opener-Policy"), "unsafe-none");
        assert_int_equal(ctl_hdrs_count(&out, "Content-Security-Policy"), 2);
        assert_string_equal(ctl_hdrs_get(&out, "Content-Security-Policy"), "default-src 'self'");
        assert_string_equal(out.v[out.n - 1].value, "frame-ancestors 'none'");
        assert_null(ctl_hdrs_get(&out, "Service-Worker-Allowed"));
        assert_null(ctl_hdrs_get(&out, "Content-Length"));
        assert_null(ctl_hdrs_get(&out, "Transfer-Encoding"));
        assert_null(ctl_hdrs_get(&out, "Connection"));
        assert_null(ctl_hdrs_get(&out, "X-Hop"));
        assert_null(ctl_hdrs_get(&out, "Keep-Alive"));
        assert_null(ctl_hdrs_get(&out, "Clear-Site-Data"));
        assert_int_equal(ctl_hdrs_count(&out, "Set-Cookie"), 3);
        for (size_t i = 0; i < out.n; i++)
                if (ctl_strcaseeq(out.v[i].name, "Set-Cookie"))
                        assert_true(streq(out.v[i].value, "app=1; Path=/") || streq(out.v[i].value, "seed_abc=1") ||
                                    streq(out.v[i].value, "\"seed_ab\"=q"));
        ctl_hdrs_free(&out);
        ctl_hdrs_free(&up);

        /* Without a CSP of its own the organism still gets frame-ancestors. */
        assert_int_equal(ctl_proxy_response_headers(&up, "seed_ab", NULL, false, &out), 0);
        assert_int_equal(ctl_hdrs_count(&out, "Content-Security-Policy"), 1);
        assert_string_equal(ctl_hdrs_get(&out, "Content-Security-Policy"), "frame-ancestors 'none'");
        ctl_hdrs_free(&out);

        /* On the admin origin: only the control plane may frame it, and the
         * organism's own frame-ancestors can only narrow that (every CSP is
         * enforced), never widen it. */
        assert_int_equal(ctl_hdrs_add(&up, "Content-Security-Policy", "frame-ancestors *"), 0);
        assert_int_equal(ctl_proxy_response_headers(&up, "seed_ab", "http://seed.localhost:8080", false, &out), 0);
        assert_int_equal(ctl_hdrs_count(&out, "Content-Security-Policy"), 2);
        assert_string_equal(out.v[out.n - 1].value, "frame-ancestors http://seed.localhost:8080");
        assert_string_equal(ctl_hdrs_get(&out, "Cross-Origin-Opener-Policy"), "unsafe-none");
        ctl_hdrs_free(&out);
        ctl_hdrs_free(&up);
}

/* The browser's cache keys every organism answer on Cookie (entering or
 * leaving a preview changes it), keeping the organism's own Vary; an answer
 * to the owner's preview is never stored, whatever the candidate says. */
static void test_proxy_response_cache_headers(void **state) {
        (void)state;
        static const struct {
                const char *vary[2]; /* the organism's Vary headers, or NULL */
                const char *want;
        } cases[] = {
                {{NULL, NULL}, "Cookie"},
                {{"Accept-Encoding", NULL}, "Accept-Encoding, Cookie"},
                {{" Accept-Encoding ,Origin", "cookie"}, "Accept-Encoding, Origin, cookie"},
                {{"Accept, COOKIE , Origin", NULL}, "Accept, COOKIE, Origin"},
                {{",, ,", NULL}, "Cookie"},
                {{"Accept", "*"}, "*"},
                {{"Cookies", NULL}, "Cookies, Cookie"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct ctl_hdrs up = {0}, out = {0};
                for (size_t k = 0; k < 2 && cases[i].vary[k]; k++)
                        assert_int_equal(ctl_hdrs_add(&up, "Vary", cases[i].vary[k]), 0);
                assert_int_equal(ctl_proxy_response_headers(&up, "seed_ab", NULL, false, &out), 0);
                assert_int_equal(ctl_hdrs_count(&out, "Vary"), 1);
                assert_string_equal(ctl_hdrs_get(&out, "Vary"), cases[i].want);
                ctl_hdrs_free(&out);
                ctl_hdrs_free(&up);
        }

        static const char *const caching[][2] = {
                {"Cache-Control", "public, max-age=31536000, immutable"},
                {"Expires", "Thu, 01 Dec 2099 16:00:00 GMT"},
                {"ETag", "\"v1\""},
                {"Last-Modified", "Tue, 15 Nov 1994 12:45:26 GMT"},
                {"Age", "12"},
                {"Content-Type", "text/html"},
        };
        struct ctl_hdrs up = {0}, out = {0};
        for (size_t i = 0; i < ARRAY_SIZE(caching); i++)
                assert_int_equal(ctl_hdrs_add(&up, caching[i][0], caching[i][1]), 0);
        /* The live app's answer: its caching is its own. */
        assert_int_equal(ctl_proxy_response_headers(&up, "seed_ab", NULL, false, &out), 0);
        for (size_t i = 0; i < ARRAY_SIZE(caching); i++)
                assert_string_equal(ctl_hdrs_get(&out, caching[i][0]), caching[i][1]);
        ctl_hdrs_free(&out);
        /* The preview's: no-store, and nothing to revalidate with. */
        assert_int_equal(ctl_proxy_response_headers(&up, "seed_ab", NULL, true, &out), 0);
        assert_int_equal(ctl_hdrs_count(&out, "Cache-Control"), 1);
        assert_string_equal(ctl_hdrs_get(&out, "Cache-Control"), "no-store");
        for (size_t i = 1; i < ARRAY_SIZE(caching) - 1; i++)
                assert_null(ctl_hdrs_get(&out, caching[i][0]));
        assert_string_equal(ctl_hdrs_get(&out, "Content-Type"), "text/html");
        assert_string_equal(ctl_hdrs_get(&out, "Vary"), "Cookie");
        ctl_hdrs_free(&out);
        ctl_hdrs_free(&up);
}

/* ---- chunked decoder ---- */

static int decode_in_pieces(const char *in, size_t step, size_t outcap, char *out, size_t *ret_len) {
        struct ctl_chunked c = {0};
        size_t pos = 0, len = 0, n = strlen(in);
        char tmp[64];
        assert_true(outcap <= sizeof tmp);
        while (pos < n) {
                size_t piece = n - pos < step ? n - pos : step, used_total = 0;
                for (;;) { /* drain the piece, outcap bytes at a time */
                        size_t used = 0, made = 0;
                        int r = ctl_chunked_decode(&c, in + pos + used_total, piece - used_total, tmp,
                                                   outcap, &used, &made);
                        if (r < 0)
                                return r;
                        memcpy(out + len, tmp, made);
                        len += made;
                        used_total += used;
                        if (r == 1) {
                                *ret_len = len;
                                return pos + used_total == n ? 1 : 2;
                        }
                        if (used_total == piece)
                                break;
                        assert_true(used > 0 || made > 0);
                }
                pos += piece;
        }
        *ret_len = len;
        return 0;
}

static void test_chunked(void **state) {
        const char *in = "5\r\nhello\r\n7;ext=\"v\"\r\n, world\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n"
                         "0\r\nX-Trailer: 1\r\n\r\n";
        const char *want = "hello, worldabcdefghijklmnopqrstuvwxyz";
        for (size_t step = 1; step <= strlen(in); step++) {
                for (size_t outcap = 1; outcap <= 64; outcap *= 4) {
                        char out[256];
                        size_t len = 0;
                        int r = decode_in_pieces(in, step, outcap, out, &len);
                        if (r != 1)
                                fail_msg("step %zu outcap %zu: r=%d", step, outcap, r);
                        out[len] = 0;
                        assert_string_equal(out, want);
                }
        }
        char out[256];
        size_t len;
        assert_int_equal(decode_in_pieces("0\r\n\r\n", 1, 16, out, &len), 1);
        assert_int_equal(len, 0);
        /* Incomplete: more input needed. */
        assert_int_equal(decode_in_pieces("5\r\nhel", 2, 16, out, &len), 0);
        assert_int_equal(len, 3);
        /* Malformed. */
        assert_int_equal(decode_in_pieces("x\r\n", 1, 16, out, &len), -EBADMSG);
        assert_int_equal(decode_in_pieces("\r\n", 1, 16, out, &len), -EBADMSG);
        assert_int_equal(decode_in_pieces("5\r\nhelloXX0\r\n\r\n", 3, 16, out, &len), -EBADMSG);
        assert_int_equal(decode_in_pieces("5\nhello\r\n", 3, 16, out, &len), -EBADMSG);
        assert_int_equal(decode_in_pieces("ffffffffffffffffff\r\n", 3, 16, out, &len), -EBADMSG);
        assert_int_equal(decode_in_pieces("-1\r\n", 3, 16, out, &len), -EBADMSG);
}

/* ---- pages and escaping ---- */

static void test_pages(void **state) {
        char *p = NULL;
        assert_int_equal(ctl_page_body_state("<b>x</b>", "building <script>alert(1)</script>", &p), 0);
        assert_non_null(strstr(p, "My body is building &lt;script&gt;alert(1)&lt;/script&gt;"));
        assert_non_null(strstr(p, "http-equiv=\"refresh\" content=\"5\""));
        assert_null(strstr(p, "<script"));
        assert_null(strstr(p, "<b>x"));
        assert_null(strstr(p, "style="));
        free(p);
        assert_int_equal(ctl_page_private("tasks", &p), 0);
        assert_non_null(strstr(p, "This Seed is private"));
        assert_null(strstr(p, "<script"));
        assert_null(strstr(p, "refresh"));
        free(p);
        assert_int_equal(ctl_page_link_invalid(&p), 0);
        assert_non_null(strstr(p, "This sign-in link is no longer valid"));
        free(p);
        assert_int_equal(ctl_page_too_old(&p), 0);
        assert_non_null(strstr(p, "too old"));
        free(p);
}

static void test_escaping(void **state) {
        struct buf b = BUF_INIT(4096);
        assert_int_equal(ctl_html_escape(&b, "<a href=\"x\" title='y'>&</a>"), 0);
        assert_string_equal(b.data, "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;");
        buf_reset(&b);
        assert_int_equal(ctl_json_string(&b, "a\"b\\c\n\x01\t é"), 0);
        assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\u0001\\t é\"");
        buf_reset(&b);
        assert_int_equal(ctl_json_string_n(&b, "x\xff\xc3", 3), 0);
        assert_string_equal(b.data, "\"x\\ufffd\\ufffd\"");
        buf_reset(&b);
        assert_int_equal(ctl_json_string_n(&b, "\xed\xa0\x80\xe2\x80\xa8", 6), 0);
        assert_string_equal(b.data, "\"\\ufffd\\ufffd\\ufffd\\u2028\"");
        buf_free(&b);
}

static void test_security_headers(void **state) {
        struct ctl_hdrs h = {0};
        assert_int_equal(ctl_add_security_headers(&h), 0);
        assert_string_equal(ctl_hdrs_get(&h, "Content-Security-Policy"),
                            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                            "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
        assert_string_equal(ctl_hdrs_get(&h, "Cross-Origin-Opener-Policy"), "same-origin");
        assert_string_equal(ctl_hdrs_get(&h, "X-Content-Type-Options"), "nosniff");
        assert_string_equal(ctl_hdrs_get(&h, "Referrer-Policy"), "no-referrer");
        assert_string_equal(ctl_hdrs_get(&h, "Cache-Control"), "no-store");
        assert_string_equal(ctl_hdrs_get(&h, "X-Frame-Options"), "DENY");
        ctl_hdrs_free(&h);
        /* A handler's own Referrer-Policy stays (the sign-in page's), the
         * CSP is always added. */
        assert_int_equal(ctl_hdrs_add(&h, "Referrer-Policy", "same-origin"), 0);
        assert_int_equal(ctl_add_security_headers(&h), 0);
        assert_int_equal(ctl_hdrs_count(&h, "Referrer-Policy"), 1);
        assert_string_equal(ctl_hdrs_get(&h, "Referrer-Policy"), "same-origin");
        assert_int_equal(ctl_hdrs_count(&h, "Content-Security-Policy"), 1);
        assert_int_equal(ctl_hdrs_count(&h, "Cache-Control"), 1);
        ctl_hdrs_free(&h);
        /* A CSP that sandboxes (the logo's) is kept instead of ours... */
        assert_int_equal(ctl_hdrs_add(&h, "Content-Security-Policy", CTL_LOGO_CSP), 0);
        assert_int_equal(ctl_add_security_headers(&h), 0);
        assert_int_equal(ctl_hdrs_count(&h, "Content-Security-Policy"), 1);
        assert_string_equal(ctl_hdrs_get(&h, "Content-Security-Policy"), CTL_LOGO_CSP);
        assert_string_equal(ctl_hdrs_get(&h, "X-Content-Type-Options"), "nosniff");
        ctl_hdrs_free(&h);
        /* ...any other one gets ours as well (both are enforced). */
        static const char *const weak[] = {"default-src *", "sandbox allow-scripts", "sandboxed",
                                           "script-src 'unsafe-inline'; sandbox"};
        for (size_t i = 0; i < ARRAY_SIZE(weak); i++) {
                assert_int_equal(ctl_hdrs_add(&h, "Content-Security-Policy", weak[i]), 0);
                assert_int_equal(ctl_add_security_headers(&h), 0);
                assert_int_equal(ctl_hdrs_count(&h, "Content-Security-Policy"), 2);
                ctl_hdrs_free(&h);
        }
        /* Two of them, even sandboxing ones: ours is added too. */
        assert_int_equal(ctl_hdrs_add(&h, "Content-Security-Policy", "sandbox"), 0);
        assert_int_equal(ctl_hdrs_add(&h, "Content-Security-Policy", "sandbox; default-src *"), 0);
        assert_int_equal(ctl_add_security_headers(&h), 0);
        assert_int_equal(ctl_hdrs_count(&h, "Content-Security-Policy"), 3);
        ctl_hdrs_free(&h);
        assert_true(ctl_csp_sandboxes("sandbox"));
        assert_true(ctl_csp_sandboxes("Sandbox ; default-src 'none'"));
        assert_false(ctl_csp_sandboxes(NULL));
        assert_false(ctl_csp_sandboxes(""));
        assert_false(ctl_csp_sandboxes("sandbox allow-same-origin"));

        /* The page's CSP: ours plus one frame-src, the admin origin only. */
        char *csp = NULL;
        assert_int_equal(ctl_csp_with_admin_frames("http://organism.localhost:8080", &csp), 0);
        assert_true(startswith(csp, CTL_CSP));
        assert_true(endswith(csp, "; frame-src http://organism.localhost:8080"));
        assert_int_equal(ctl_hdrs_add(&h, "Content-Security-Policy", csp), 0);
        assert_int_equal(ctl_add_security_headers(&h), 0);
        assert_int_equal(ctl_hdrs_count(&h, "Content-Security-Policy"), 1);
        assert_string_equal(ctl_hdrs_get(&h, "Content-Security-Policy"), csp);
        assert_string_equal(ctl_hdrs_get(&h, "X-Frame-Options"), "DENY");
        ctl_hdrs_free(&h);
        free(csp);
        assert_int_equal(ctl_csp_with_admin_frames("http://organism.localhost", &csp), 0);
        assert_true(ctl_csp_frames_admin(csp));
        free(csp);
        csp = NULL;
        static const char *const other[] = {"http://seed.localhost:8080", "http://organism.localhost:8080 *",
                                            "*", "http://organism.localhost:", "http://organism.localhost:123456",
                                            "http://organism.localhost:80; script-src *", "https://organism.localhost",
                                            "http://organism.localhost.evil.com", "http://x.organism.localhost"};
        for (size_t i = 0; i < ARRAY_SIZE(other); i++)
                assert_int_equal(ctl_csp_with_admin_frames(other[i], &csp), -EINVAL);
        assert_int_equal(ctl_csp_with_admin_frames(NULL, &csp), -EINVAL);
        assert_null(csp);
        /* Anything else after ours is not the page's: ours is added too. */
        static const char *const forged[] = {
                "default-src 'none'; frame-src *",
                "frame-src http://organism.localhost:1",
        };
        for (size_t i = 0; i < ARRAY_SIZE(forged); i++) {
                assert_false(ctl_csp_frames_admin(forged[i]));
                assert_int_equal(ctl_hdrs_add(&h, "Content-Security-Policy", forged[i]), 0);
                assert_int_equal(ctl_add_security_headers(&h), 0);
                assert_int_equal(ctl_hdrs_count(&h, "Content-Security-Policy"), 2);
                ctl_hdrs_free(&h);
        }
        /* The kernel's own pages on the admin origin: ours, framed by one origin. */
        assert_int_equal(ctl_csp_framed_by("http://seed.localhost:8080", &csp), 0);
        assert_string_equal(csp, "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                 "connect-src 'self'; frame-ancestors http://seed.localhost:8080; base-uri 'none'; "
                                 "form-action 'self'");
        free(csp);
        csp = NULL;
        static const char *const not_origins[] = {"*", "'self'", "http://*", "http://*.localhost", "http://a; script-src *", "http://a b",
                                                  "https://x", "http://a/path", "http://a,http://b", "http://a\r\nX: y"};
        for (size_t i = 0; i < ARRAY_SIZE(not_origins); i++)
                assert_int_equal(ctl_csp_framed_by(not_origins[i], &csp), -EINVAL);
        assert_int_equal(ctl_csp_framed_by(NULL, &csp), -EINVAL);
        assert_null(csp);
        _cleanup_free_ char *tail = NULL;
        assert_int_equal(xasprintf(&tail, "%s; frame-src http://organism.localhost:1; script-src-elem *", CTL_CSP), 0);
        assert_false(ctl_csp_frames_admin(tail));
}

/* ---- clients, trusted proxies and the failure limiter ---- */

static struct ctl_client client_of(const char *ip) {
        struct ctl_ip a;
        struct ctl_client c;
        if (ctl_ip_parse(ip, strlen(ip), &a) < 0)
                fail_msg("cannot parse %s", ip);
        ctl_client_from_ip(&a, &c);
        return c;
}

static const char *client_str(const struct ctl_client *c) {
        static char out[CTL_CLIENT_STRLEN];
        ctl_client_str(c, out);
        return out;
}

static void test_ip_parse(void **state) {
        static const struct {
                const char *in;
                int family;
                const char *client;
        } ok[] = {
                {"1.2.3.4", AF_INET, "1.2.3.4"},
                {" 10.0.0.1 ", AF_INET, "10.0.0.1"},
                {"1.2.3.4:8080", AF_INET, "1.2.3.4"},
                {"::1", AF_INET6, "::/48"},
                {"[2001:db8:1:2::3]", AF_INET6, "2001:db8:1::/48"},
                {"[2001:db8:1:2::3]:443", AF_INET6, "2001:db8:1::/48"},
                {"2001:db8:abcd:ffff:1:2:3:4", AF_INET6, "2001:db8:abcd::/48"},
                {"::ffff:192.0.2.7", AF_INET, "192.0.2.7"},
                {"[::ffff:192.0.2.7]:1", AF_INET, "192.0.2.7"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                struct ctl_ip a;
                if (ctl_ip_parse(ok[i].in, strlen(ok[i].in), &a) < 0)
                        fail_msg("refused %s", ok[i].in);
                assert_int_equal(a.family, ok[i].family);
                struct ctl_client c;
                ctl_client_from_ip(&a, &c);
                assert_string_equal(client_str(&c), ok[i].client);
        }
        static const char *const bad[] = {
                "", " ", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.4:", "1.2.3.4:x", "1.2.3.4:123456",
                "[1.2.3.4]", "[::1", "[::1]x", "[::1]:", "::1::2", "example.com", "unknown",
                "1.2.3.4/8", "2001:db8::/48", "01.2.3.4x",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct ctl_ip a;
                if (ctl_ip_parse(bad[i], strlen(bad[i]), &a) == 0)
                        fail_msg("accepted '%s'", bad[i]);
        }
        /* Only len bytes are read. */
        struct ctl_ip a;
        assert_int_equal(ctl_ip_parse("1.2.3.4, 5.6.7.8", 7, &a), 0);
        assert_int_equal(a.a[3], 4);
}

static void test_client_grouping(void **state) {
        struct ctl_client a = client_of("2001:db8:1:1::1"), b = client_of("2001:db8:1:ffff::2"),
                          c = client_of("2001:db8:2::1"), d = client_of("2001:db8:0:1::1");
        assert_true(ctl_client_eq(&a, &b));   /* the same /48 */
        assert_false(ctl_client_eq(&a, &c));
        assert_false(ctl_client_eq(&a, &d));
        struct ctl_client e = client_of("192.0.2.1"), f = client_of("192.0.2.2"),
                          g = client_of("::ffff:192.0.2.1");
        assert_false(ctl_client_eq(&e, &f));  /* IPv4: each address */
        assert_true(ctl_client_eq(&e, &g));
        struct ctl_client v6zero = client_of("::"), v4zero = client_of("0.0.0.0");
        assert_false(ctl_client_eq(&v6zero, &v4zero));
}

static void test_proxies_parse(void **state) {
        struct ctl_proxies p;
        assert_int_equal(ctl_proxies_parse(NULL, &p), 0);
        assert_false(ctl_proxies_any(&p));
        assert_int_equal(ctl_proxies_parse("  ", &p), 0);
        assert_false(ctl_proxies_any(&p));
        assert_int_equal(ctl_proxies_parse("1", &p), 0);
        assert_int_equal(p.hops, 1);
        assert_int_equal(ctl_proxies_parse(" 2 ", &p), 0);
        assert_int_equal(p.hops, 2);
        assert_int_equal(ctl_proxies_parse("127.0.0.1, 10.0.0.0/8,2001:db8::/32 , ::1", &p), 0);
        assert_int_equal(p.hops, 0);
        assert_int_equal(p.n, 4);
        assert_int_equal(p.v[1].prefix, 8);
        assert_int_equal(p.v[0].prefix, 32);
        assert_int_equal(p.v[3].prefix, 128);
        /* Host bits of a range are masked. */
        assert_int_equal(ctl_proxies_parse("10.1.2.3/8", &p), 0);
        assert_int_equal(p.v[0].ip.a[1], 0);
        static const char *const bad[] = {"0", "17", "100", "-1", "1.2.3.4/33", "::1/129", "10.0.0.0/",
                                          "10.0.0.0/x", "1.2.3.4,", ",1.2.3.4", "1.2.3.4,,5.6.7.8",
                                          "proxy.example.com", "1 2", "1.2.3.4 5.6.7.8"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct ctl_proxies q = {.hops = 99};
                if (ctl_proxies_parse(bad[i], &q) == 0)
                        fail_msg("accepted '%s'", bad[i]);
                assert_int_equal(q.hops, 99); /* left alone */
        }
        char many[1024] = "";
        for (int i = 0; i <= CTL_MAX_PROXIES; i++)
                snprintf(many + strlen(many), sizeof many - strlen(many), "%s10.0.0.%d", i ? "," : "", i);
        assert_int_equal(ctl_proxies_parse(many, &p), -EINVAL);
}

/* The client of peer with one X-Forwarded-For header xff (may be NULL). */
static const char *who(const char *proxies, const char *peer, const char *xff) {
        struct ctl_proxies p;
        struct ctl_client c;
        char *v[1] = {(char *)xff};
        assert_int_equal(ctl_proxies_parse(proxies, &p), 0);
        assert_int_equal(ctl_client_of(&p, peer, v, xff ? 1 : 0, &c), 0);
        return client_str(&c);
}

static void test_client_of(void **state) {
        /* No trusted proxy: X-Forwarded-For is ignored. */
        assert_string_equal(who(NULL, "127.0.0.1", "203.0.113.9"), "127.0.0.1");
        assert_string_equal(who("", "192.0.2.1", "203.0.113.9, 198.51.100.2"), "192.0.2.1");
        /* A peer that is not a listed proxy: ignored too. */
        assert_string_equal(who("127.0.0.1", "127.0.0.2", "203.0.113.9"), "127.0.0.2");
        assert_string_equal(who("10.0.0.0/8", "11.0.0.1", "203.0.113.9"), "11.0.0.1");
        /* A listed peer: the right-most entry that is not a proxy. */
        assert_string_equal(who("127.0.0.1", "127.0.0.1", "203.0.113.9"), "203.0.113.9");
        assert_string_equal(who("127.0.0.1", "127.0.0.1", "6.6.6.6, 203.0.113.9"), "203.0.113.9");
        assert_string_equal(who("127.0.0.1, 10.0.0.0/8", "127.0.0.1", "6.6.6.6, 203.0.113.9, 10.1.1.1"),
                            "203.0.113.9");
        assert_string_equal(who("127.0.0.1", "127.0.0.1", "[2001:db8:7:1::5]:4711"), "2001:db8:7::/48");
        assert_string_equal(who("127.0.0.1", "::ffff:127.0.0.1", "198.51.100.7"), "198.51.100.7");
        /* Every entry a proxy: the left-most. No header: the peer. */
        assert_string_equal(who("10.0.0.0/8", "10.0.0.1", "10.0.0.2, 10.0.0.3"), "10.0.0.2");
        assert_string_equal(who("127.0.0.1", "127.0.0.1", NULL), "127.0.0.1");
        assert_string_equal(who("127.0.0.1", "127.0.0.1", ""), "127.0.0.1");
        /* A malformed entry stops the walk at the last good hop: a client
         * cannot hide behind garbage. */
        assert_string_equal(who("127.0.0.1", "127.0.0.1", "203.0.113.9, garbage"), "127.0.0.1");
        assert_string_equal(who("127.0.0.1, 10.0.0.0/8", "127.0.0.1", "garbage, 10.0.0.7"), "10.0.0.7");
        /* Empty entries are skipped. */
        assert_string_equal(who("127.0.0.1", "127.0.0.1", "203.0.113.9, , "), "203.0.113.9");
        /* The count form: the n-th entry from the right, whoever the peer. */
        assert_string_equal(who("1", "192.0.2.1", "6.6.6.6, 203.0.113.9"), "203.0.113.9");
        assert_string_equal(who("2", "192.0.2.1", "6.6.6.6, 203.0.113.9, 10.0.0.1"), "203.0.113.9");
        assert_string_equal(who("3", "192.0.2.1", "203.0.113.9"), "203.0.113.9");
        assert_string_equal(who("1", "192.0.2.1", NULL), "192.0.2.1");
        assert_string_equal(who("2", "192.0.2.1", "bad, 203.0.113.9"), "203.0.113.9");

        /* Several headers are one list, in order: the last header's last
         * entry is the right-most. */
        struct ctl_proxies p;
        struct ctl_client c;
        char *v[] = {"6.6.6.6, 7.7.7.7", "203.0.113.9", "10.0.0.1"};
        assert_int_equal(ctl_proxies_parse("127.0.0.1, 10.0.0.0/8", &p), 0);
        assert_int_equal(ctl_client_of(&p, "127.0.0.1", v, 3, &c), 0);
        assert_string_equal(client_str(&c), "203.0.113.9");
        assert_int_equal(ctl_proxies_parse("3", &p), 0);
        assert_int_equal(ctl_client_of(&p, "127.0.0.1", v, 3, &c), 0);
        assert_string_equal(client_str(&c), "7.7.7.7");
        assert_int_equal(ctl_client_of(&p, "unknown", v, 3, &c), -EINVAL);
}

#define MIN (60 * 1000LL)

static void test_limiter_per_client(void **state) {
        struct ctl_limiter *l = NULL;
        assert_int_equal(ctl_limiter_new(&ctl_limits_default, &l), 0);
        struct ctl_client a = client_of("192.0.2.1"), b = client_of("192.0.2.2");
        int64_t t = 1000000;
        for (int i = 0; i < 5; i++) {
                assert_int_equal(ctl_limiter_begin(l, &a, t + i), CTL_LIMIT_NONE);
                assert_int_equal(ctl_limiter_end(l, &a, true, t + i), i < 4 ? CTL_LIMIT_NONE : CTL_LIMIT_CLIENT);
        }
        /* The 6th attempt is not let through; another client is. */
        assert_int_equal(ctl_limiter_begin(l, &a, t + 10), CTL_LIMIT_CLIENT);
        assert_int_equal(ctl_limiter_state(l, &a, t + 10), CTL_LIMIT_CLIENT);
        assert_int_equal(ctl_limiter_begin(l, &b, t + 10), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_end(l, &b, false, t + 10), CTL_LIMIT_NONE);
        /* Sliding: limited until the oldest of the 5 is 15 minutes old. */
        assert_int_equal(ctl_limiter_state(l, &a, t + 15 * MIN - 1), CTL_LIMIT_CLIENT);
        assert_int_equal(ctl_limiter_state(l, &a, t + 15 * MIN), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_begin(l, &a, t + 15 * MIN), CTL_LIMIT_NONE);
        /* That attempt fails: 5 in the window again (t+1 .. t+4 and now). */
        assert_int_equal(ctl_limiter_end(l, &a, true, t + 15 * MIN), CTL_LIMIT_CLIENT);
        assert_int_equal(ctl_limiter_state(l, &a, t + 15 * MIN + 1), CTL_LIMIT_NONE);
        ctl_limiter_free(l);
}

static void test_limiter_success_and_links(void **state) {
        struct ctl_limiter *l = NULL;
        assert_int_equal(ctl_limiter_new(&ctl_limits_default, &l), 0);
        struct ctl_client a = client_of("2001:db8:1:1::1"), same48 = client_of("2001:db8:1:9::9");
        int64_t t = 5000;
        for (int i = 0; i < 4; i++) {
                assert_int_equal(ctl_limiter_begin(l, &a, t), CTL_LIMIT_NONE);
                ctl_limiter_end(l, &a, true, t);
        }
        /* A success forgets the client's failures. */
        assert_int_equal(ctl_limiter_begin(l, &same48, t), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_end(l, &same48, false, t), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_tracked(l, t), 0);
        /* Bad links count like wrong passwords, for the whole /48. */
        for (int i = 0; i < 4; i++)
                assert_int_equal(ctl_limiter_fail(l, &a, t + i), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_fail(l, &same48, t + 5), CTL_LIMIT_CLIENT);
        assert_int_equal(ctl_limiter_begin(l, &a, t + 6), CTL_LIMIT_CLIENT);
        assert_int_equal(ctl_limiter_tracked(l, t + 6), 1);
        ctl_limiter_free(l);
}

/* Bad links from a client that is limited already add nothing overall: a
 * thousand of them from one address do not lock every address out. */
static void test_limiter_limited_client_adds_nothing_overall(void **state) {
        struct ctl_limiter *l = NULL;
        assert_int_equal(ctl_limiter_new(&ctl_limits_default, &l), 0);
        struct ctl_client a = client_of("192.0.2.1"), b = client_of("192.0.2.2");
        for (int i = 0; i < 3 * CTL_FAIL_OVERALL; i++)
                assert_int_equal(ctl_limiter_fail(l, &a, 1000 + i),
                                 i < CTL_FAIL_PER_CLIENT - 1 ? CTL_LIMIT_NONE : CTL_LIMIT_CLIENT);
        assert_int_equal(ctl_limiter_state(l, &b, 5000), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_begin(l, &b, 5000), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_end(l, &b, true, 5000), CTL_LIMIT_NONE);
        ctl_limiter_free(l);
}

static void test_limiter_parallel_attempts(void **state) {
        struct ctl_limiter *l = NULL;
        assert_int_equal(ctl_limiter_new(&ctl_limits_default, &l), 0);
        struct ctl_client a = client_of("192.0.2.1");
        /* Attempts in flight count: no more than 5 at once. */
        for (int i = 0; i < 5; i++)
                assert_int_equal(ctl_limiter_begin(l, &a, 1), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_begin(l, &a, 1), CTL_LIMIT_CLIENT);
        assert_int_equal(ctl_limiter_end(l, &a, false, 2), CTL_LIMIT_NONE); /* a success clears */
        assert_int_equal(ctl_limiter_begin(l, &a, 2), CTL_LIMIT_NONE);     /* 4 in flight, no failure */
        assert_int_equal(ctl_limiter_begin(l, &a, 2), CTL_LIMIT_CLIENT);
        for (int i = 0; i < 4; i++)
                assert_int_equal(ctl_limiter_end(l, &a, true, 3), CTL_LIMIT_CLIENT); /* failures + in flight */
        assert_int_equal(ctl_limiter_state(l, &a, 3), CTL_LIMIT_CLIENT);    /* 4 failures + 1 in flight */
        assert_int_equal(ctl_limiter_end(l, &a, false, 3), CTL_LIMIT_NONE); /* that one succeeds */
        assert_int_equal(ctl_limiter_state(l, &a, 3), CTL_LIMIT_NONE);
        ctl_limiter_free(l);
}

static void test_limiter_overall(void **state) {
        const struct ctl_limits lim = {.per_client = 5, .overall = 20, .window_ms = 15 * MIN, .max_clients = 64};
        struct ctl_limiter *l = NULL;
        assert_int_equal(ctl_limiter_new(&lim, &l), 0);
        char ip[32];
        for (int i = 0; i < 20; i++) {
                snprintf(ip, sizeof ip, "198.51.100.%d", i / 4); /* 4 each: no client is limited */
                struct ctl_client c = client_of(ip);
                assert_int_equal(ctl_limiter_begin(l, &c, 1000 + i), CTL_LIMIT_NONE);
                assert_int_equal(ctl_limiter_end(l, &c, true, 1000 + i), i < 19 ? CTL_LIMIT_NONE : CTL_LIMIT_OVERALL);
        }
        struct ctl_client fresh = client_of("203.0.113.1");
        assert_int_equal(ctl_limiter_begin(l, &fresh, 2000), CTL_LIMIT_OVERALL);
        assert_int_equal(ctl_limiter_tracked(l, 2000), 5); /* the refusal tracked nobody new */
        /* More failures (bad links) keep it: the newest 20 are kept. */
        assert_int_equal(ctl_limiter_fail(l, &fresh, 3000), CTL_LIMIT_OVERALL);
        /* Sliding: the first failure leaves the window, one place opens. */
        assert_int_equal(ctl_limiter_state(l, &fresh, 1001 + 15 * MIN), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_begin(l, &fresh, 1001 + 15 * MIN), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_begin(l, &fresh, 1001 + 15 * MIN), CTL_LIMIT_OVERALL); /* in flight counts */
        ctl_limiter_end(l, &fresh, false, 1001 + 15 * MIN);
        assert_int_equal(ctl_limiter_state(l, &fresh, 3000 + 15 * MIN), CTL_LIMIT_NONE);
        ctl_limiter_free(l);
}

static void test_limiter_eviction(void **state) {
        const struct ctl_limits lim = {.per_client = 2, .overall = 1000, .window_ms = 15 * MIN, .max_clients = 4};
        struct ctl_limiter *l = NULL;
        assert_int_equal(ctl_limiter_new(&lim, &l), 0);
        struct ctl_client c[6];
        char ip[32];
        for (int i = 0; i < 6; i++) {
                snprintf(ip, sizeof ip, "192.0.2.%d", i + 1);
                c[i] = client_of(ip);
        }
        for (int i = 0; i < 4; i++) {
                ctl_limiter_fail(l, &c[i], 100 + i);
                ctl_limiter_fail(l, &c[i], 100 + i);
                assert_int_equal(ctl_limiter_state(l, &c[i], 200), CTL_LIMIT_CLIENT);
        }
        assert_int_equal(ctl_limiter_tracked(l, 200), 4);
        /* A new client when full forgets the one whose last failure is oldest (c[0]). */
        ctl_limiter_fail(l, &c[1], 300);
        ctl_limiter_fail(l, &c[4], 400);
        assert_int_equal(ctl_limiter_tracked(l, 401), 4);
        assert_int_equal(ctl_limiter_state(l, &c[0], 401), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_state(l, &c[1], 401), CTL_LIMIT_CLIENT);
        assert_int_equal(ctl_limiter_state(l, &c[2], 401), CTL_LIMIT_CLIENT);
        /* A client with an attempt in flight is never forgotten. */
        assert_int_equal(ctl_limiter_begin(l, &c[4], 500), CTL_LIMIT_NONE);
        ctl_limiter_fail(l, &c[5], 600); /* forgets c[2] (103), not c[4] */
        assert_int_equal(ctl_limiter_state(l, &c[2], 601), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_end(l, &c[4], true, 700), CTL_LIMIT_CLIENT);
        /* Clients whose failures left the window are dropped, not evicted. */
        assert_int_equal(ctl_limiter_state(l, &c[5], 600 + 15 * MIN), CTL_LIMIT_NONE);
        ctl_limiter_fail(l, &c[0], 800 + 15 * MIN);
        assert_int_equal(ctl_limiter_tracked(l, 800 + 15 * MIN), 1);
        ctl_limiter_free(l);

        const struct ctl_limits bad = {.per_client = 0, .overall = 1, .window_ms = 1, .max_clients = 1};
        assert_int_equal(ctl_limiter_new(&bad, &l), -EINVAL);
}

static void test_limiter_all_slots_busy(void **state) {
        const struct ctl_limits lim = {.per_client = 5, .overall = 1000, .window_ms = 15 * MIN, .max_clients = 2};
        struct ctl_limiter *l = NULL;
        assert_int_equal(ctl_limiter_new(&lim, &l), 0);
        struct ctl_client a = client_of("192.0.2.1"), b = client_of("192.0.2.2"), c = client_of("192.0.2.3");
        assert_int_equal(ctl_limiter_begin(l, &a, 1), CTL_LIMIT_NONE);
        assert_int_equal(ctl_limiter_begin(l, &b, 1), CTL_LIMIT_NONE);
        /* Nowhere to count a third: refused rather than unlimited. */
        assert_int_equal(ctl_limiter_begin(l, &c, 1), CTL_LIMIT_OVERALL);
        ctl_limiter_end(l, &a, true, 2);
        assert_int_equal(ctl_limiter_begin(l, &c, 3), CTL_LIMIT_NONE);
        ctl_limiter_end(l, &b, false, 4);
        ctl_limiter_end(l, &c, false, 4);
        ctl_limiter_free(l);
}

/* ---- the owner's password ---- */

static void test_owner(void **state) {
        struct ctl_owner o;
        assert_int_equal(ctl_owner_init(&o, NULL, NULL), -ENOENT);
        assert_false(o.enabled);
        assert_int_equal(ctl_owner_init(&o, NULL, ""), -ENOENT);
        assert_int_equal(ctl_owner_init(&o, NULL, "elevenchars"), -EINVAL);
        assert_false(ctl_owner_check(&o, "owner", "elevenchars"));
        /* Characters, not bytes: 11 × "é" is 22 bytes but 11 characters. */
        assert_int_equal(ctl_owner_init(&o, NULL, "ééééééééééé"), -EINVAL);
        assert_int_equal(ctl_utf8_chars("ééééééééééé"), 11);
        assert_int_equal(ctl_owner_init(&o, "bad\nuser", "twelve chars"), -EBADMSG);
        char huge[CTL_PASSWORD_MAX_BYTES + 2];
        memset(huge, 'x', sizeof huge - 1);
        huge[sizeof huge - 1] = 0;
        assert_int_equal(ctl_owner_init(&o, NULL, huge), -E2BIG);

        char password[] = "correct horse battery";
        assert_int_equal(ctl_owner_init(&o, NULL, password), 0);
        assert_true(o.enabled);
        /* Only keyed hashes are kept. */
        assert_null(memmem(&o, sizeof o, "correct horse", 13));
        assert_null(memmem(&o, sizeof o, "owner", 5));
        assert_true(ctl_owner_check(&o, "owner", password));
        assert_false(ctl_owner_check(&o, "owner", "correct horse batterY"));
        assert_false(ctl_owner_check(&o, "owner", "correct horse battery "));
        assert_false(ctl_owner_check(&o, "Owner", password));
        assert_false(ctl_owner_check(&o, "", password));
        assert_false(ctl_owner_check(&o, password, "owner"));
        assert_false(ctl_owner_check(&o, NULL, password));
        assert_false(ctl_owner_check(&o, "owner", NULL));
        assert_false(ctl_owner_check(&o, "owner", huge));
        /* Each start draws a new key: the same password hashes differently. */
        struct ctl_owner o2;
        assert_int_equal(ctl_owner_init(&o2, "owner", password), 0);
        assert_string_not_equal(o.password_mac, o2.password_mac);
        assert_true(ctl_owner_check(&o2, "owner", password));
        assert_int_equal(ctl_owner_init(&o2, "alice", "twelve chars"), 0);
        assert_true(ctl_owner_check(&o2, "alice", "twelve chars"));
        assert_false(ctl_owner_check(&o2, "owner", "twelve chars"));
        ctl_owner_clear(&o);
        assert_false(o.enabled);
        assert_false(ctl_owner_check(&o, "owner", password));
        ctl_owner_clear(&o2);
}

static void test_sign_in_pages(void **state) {
        char *p = NULL;
        assert_int_equal(ctl_page_sign_in("tasks", CTL_SIGN_IN_FORM, "Wrong <b>", &p), 0);
        assert_non_null(strstr(p, "<form class=\"sign-in\" method=\"post\" action=\"/_seed/login\""));
        assert_non_null(strstr(p, "name=\"user\""));
        assert_non_null(strstr(p, "name=\"password\" type=\"password\" autocomplete=\"off\""));
        assert_non_null(strstr(p, "Don't let the browser save this password"));
        assert_non_null(strstr(p, "Wrong &lt;b&gt;"));
        assert_null(strstr(p, "<script"));
        assert_null(strstr(p, "style="));
        assert_null(strstr(p, " on")); /* no inline handlers */
        assert_null(strstr(p, "Open the control plane"));
        free(p);
        /* On the own origin a password manager may save it. */
        assert_int_equal(ctl_page_sign_in("tasks", CTL_SIGN_IN_FORM | CTL_SIGN_IN_SAVEABLE, NULL, &p), 0);
        assert_non_null(strstr(p, "autocomplete=\"username\""));
        assert_non_null(strstr(p, "autocomplete=\"current-password\""));
        assert_null(strstr(p, "autocomplete=\"off\""));
        assert_null(strstr(p, "Don't let the browser save"));
        free(p);
        assert_int_equal(ctl_page_sign_in("tasks", CTL_SIGN_IN_REOPEN, NULL, &p), 0);
        assert_null(strstr(p, "<form"));
        assert_non_null(strstr(p, "<a id=\"reopen\" href=\"/_seed/\">Open the control plane</a>"));
        /* reopen.js carries an #ask= fragment over to the reopened page. */
        assert_non_null(strstr(p, "<script src=\"/_seed/reopen.js\"></script>"));
        free(p);
        assert_int_equal(ctl_page_sign_in("tasks", 0, NULL, &p), 0);
        assert_null(strstr(p, "<form"));
        assert_null(strstr(p, "role=\"alert\""));
        free(p);
        assert_int_equal(ctl_page_signed_in(&p), 0);
        assert_non_null(strstr(p, "<meta http-equiv=\"refresh\" content=\"0;url=/_seed/\">"));
        assert_null(strstr(p, "<script"));
        free(p);
        assert_int_equal(ctl_page_limited(false, &p), 0);
        assert_non_null(strstr(p, "Too many failed sign-ins"));
        assert_null(strstr(p, "<form"));
        free(p);
        assert_int_equal(ctl_page_limited(true, &p), 0);
        assert_non_null(strstr(p, "seed login"));
        free(p);
}


/* ---- connections per client ---- */

static void test_ip_from_sockaddr(void **state) {
        struct ctl_ip ip;
        struct sockaddr_in v4 = {.sin_family = AF_INET};
        assert_int_equal(inet_pton(AF_INET, "192.0.2.7", &v4.sin_addr), 1);
        assert_int_equal(ctl_ip_from_sockaddr((struct sockaddr *)&v4, sizeof v4, &ip), 0);
        assert_int_equal(ip.family, AF_INET);
        assert_memory_equal(ip.a, "\xc0\x00\x02\x07", 4);
        assert_int_equal(ctl_ip_from_sockaddr((struct sockaddr *)&v4, sizeof v4 - 1, &ip), -EINVAL);

        struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
        assert_int_equal(inet_pton(AF_INET6, "2001:db8::1", &v6.sin6_addr), 1);
        assert_int_equal(ctl_ip_from_sockaddr((struct sockaddr *)&v6, sizeof v6, &ip), 0);
        assert_int_equal(ip.family, AF_INET6);
        assert_int_equal(ip.a[0], 0x20);
        assert_int_equal(ip.a[15], 1);
        /* An IPv4-mapped peer (a dual-stack socket) is the IPv4 client. */
        assert_int_equal(inet_pton(AF_INET6, "::ffff:192.0.2.7", &v6.sin6_addr), 1);
        assert_int_equal(ctl_ip_from_sockaddr((struct sockaddr *)&v6, sizeof v6, &ip), 0);
        assert_int_equal(ip.family, AF_INET);
        assert_memory_equal(ip.a, "\xc0\x00\x02\x07", 4);

        struct sockaddr_un un = {.sun_family = AF_UNIX};
        assert_int_equal(ctl_ip_from_sockaddr((struct sockaddr *)&un, sizeof un, &ip), -EAFNOSUPPORT);
        assert_int_equal(ctl_ip_from_sockaddr(NULL, 0, &ip), -EINVAL);
}

static struct ctl_ip ip_of(const char *s) {
        struct ctl_ip ip;
        if (ctl_ip_parse(s, strlen(s), &ip) < 0)
                fail_msg("cannot parse %s", s);
        return ip;
}

static void test_proxies_trusts(void **state) {
        struct ctl_proxies p;
        struct ctl_ip a = ip_of("10.1.2.3"), b = ip_of("192.0.2.1"), c = ip_of("2001:db8::5");
        assert_int_equal(ctl_proxies_parse(NULL, &p), 0);
        assert_false(ctl_proxies_trusts(&p, &a));
        assert_false(ctl_proxies_trusts(NULL, &a));
        /* Count form: whoever connects may be the ingress. */
        assert_int_equal(ctl_proxies_parse("1", &p), 0);
        assert_true(ctl_proxies_trusts(&p, &a));
        assert_true(ctl_proxies_trusts(&p, &c));
        /* List form: the listed ones only. */
        assert_int_equal(ctl_proxies_parse("10.0.0.0/8, 2001:db8::/32", &p), 0);
        assert_true(ctl_proxies_trusts(&p, &a));
        assert_true(ctl_proxies_trusts(&p, &c));
        assert_false(ctl_proxies_trusts(&p, &b));
}

static struct ctl_client conn_client(const char *ip) {
        struct ctl_ip a = ip_of(ip);
        struct ctl_client c;
        ctl_client_from_ip(&a, &c);
        return c;
}

/* The cut function of the conns tests: records the fds it was given. */
static struct {
        int fds[64];
        int n;
} cuts;

static void record_cut(void *userdata, int fd) {
        assert_true(cuts.n < (int)ARRAY_SIZE(cuts.fds));
        cuts.fds[cuts.n++] = fd;
}

static struct ctl_conns *conns_new(unsigned total, unsigned anon, unsigned per_client, unsigned proxied) {
        const struct ctl_conns_limits lim = {.total = total, .anon = anon, .anon_per_client = per_client,
                                             .proxied = proxied, .head_ms = 1000};
        struct ctl_conns *t = NULL;
        assert_int_equal(ctl_conns_new(&lim, record_cut, NULL, &t), 0);
        cuts.n = 0;
        return t;
}

/* Opens a connection at time 0 on fd; returns its id. */
static uint64_t conn_open(struct ctl_conns *t, const struct ctl_client *c, int fd, int want_report) {
        uint64_t id = 0;
        assert_int_equal(ctl_conns_open(t, c, fd, 0, &id), want_report);
        assert_true(id != 0);
        return id;
}

static void test_conns_limits_checked(void **state) {
        struct ctl_conns *t = NULL;
        const struct ctl_conns_limits ok = {.total = 10, .anon = 4, .anon_per_client = 2, .proxied = 4,
                                            .head_ms = 1};
        struct ctl_conns_limits l = ok;
        assert_int_equal(ctl_conns_new(&l, NULL, NULL, &t), -EINVAL);
        l.proxied = 6; /* anonymous + proxied must leave room for the owner */
        assert_int_equal(ctl_conns_new(&l, record_cut, NULL, &t), -EINVAL);
        l = ok, l.anon = 0;
        assert_int_equal(ctl_conns_new(&l, record_cut, NULL, &t), -EINVAL);
        l = ok, l.anon_per_client = 0;
        assert_int_equal(ctl_conns_new(&l, record_cut, NULL, &t), -EINVAL);
        l = ok, l.head_ms = 0;
        assert_int_equal(ctl_conns_new(&l, record_cut, NULL, &t), -EINVAL);
        assert_int_equal(ctl_conns_new(&ok, record_cut, NULL, &t), 0);
        ctl_conns_free(t);
        ctl_conns_free(NULL);
}

static void test_conns_cut_oldest_of_client(void **state) {
        struct ctl_conns *t = conns_new(40, 20, 3, 4);
        struct ctl_client a = conn_client("192.0.2.1"), b = conn_client("192.0.2.2");
        uint64_t ids[10];
        for (int i = 0; i < 3; i++)
                ids[i] = conn_open(t, &a, 100 + i, 0);
        assert_int_equal(cuts.n, 0);
        /* The fourth is counted; the oldest is cut (reported once). */
        ids[3] = conn_open(t, &a, 103, CTL_CONNS_CUT_CLIENT);
        ids[4] = conn_open(t, &a, 104, 0);
        assert_int_equal(cuts.n, 2);
        assert_int_equal(cuts.fds[0], 100);
        assert_int_equal(cuts.fds[1], 101);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_ANON, &a), 3);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_N, NULL), 3);
        /* Another client is not affected. */
        conn_open(t, &b, 200, 0);
        assert_int_equal(cuts.n, 2);
        /* A cut connection counts for nothing, and its close changes nothing
         * more (twice neither); nor do calls on it. */
        ctl_conns_authenticated(t, ids[0]);
        ctl_conns_close(t, ids[0]);
        ctl_conns_close(t, ids[0]);
        ctl_conns_close(t, 0);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_ANON, &a), 3);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_OWNER, NULL), 0);
        /* A newcomer the client authenticates is out of the pool: no cut. */
        ids[5] = conn_open(t, &a, 105, 0);
        assert_int_equal(cuts.fds[cuts.n - 1], 102);
        int before = cuts.n;
        ctl_conns_close(t, ids[1]);
        ctl_conns_close(t, ids[2]);
        ctl_conns_authenticated(t, ids[5]);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_ANON, &a), 2);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_OWNER, &a), 1);
        conn_open(t, &a, 106, 0);
        assert_int_equal(cuts.n, before);
        /* Once the flood is gone, the next one is reported again. */
        ctl_conns_close(t, ids[3]);
        ctl_conns_close(t, ids[4]);
        uint64_t more[4];
        for (int i = 0; i < 4; i++)
                more[i] = conn_open(t, &a, 110 + i, i == 2 ? CTL_CONNS_CUT_CLIENT : 0);
        assert_int_equal(cuts.fds[cuts.n - 1], 110);
        assert_int_not_equal(more[3], 0);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_ANON, &a), 3);
        ctl_conns_free(t);
}

static void test_conns_untrusted_grouping(void **state) {
        struct ctl_conns *t = conns_new(40, 20, 2, 4);
        /* One IPv6 /48 is one client. */
        struct ctl_client x = conn_client("2001:db8:aa:1::1"), y = conn_client("2001:db8:aa:ffff::9");
        conn_open(t, &x, 1, 0);
        conn_open(t, &y, 2, 0);
        conn_open(t, &x, 3, CTL_CONNS_CUT_CLIENT);
        assert_int_equal(cuts.n, 1);
        assert_int_equal(cuts.fds[0], 1);
        /* A peer that may be a trusted proxy is capped only in all. */
        for (int i = 0; i < 10; i++)
                conn_open(t, NULL, 10 + i, 0);
        assert_int_equal(cuts.n, 1);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_ANON, NULL), 12);
        ctl_conns_free(t);
}

static void test_conns_cut_oldest_in_all(void **state) {
        struct ctl_conns *t = conns_new(40, 6, 4, 4);
        char ip[32];
        struct ctl_client c[8];
        for (int i = 0; i < 8; i++) {
                snprintf(ip, sizeof ip, "198.51.100.%d", i + 1);
                c[i] = conn_client(ip);
        }
        /* 20 clients' worth of slow connections: the anonymous pool stays at
         * 6, the oldest going first, reported once. */
        for (int i = 0; i < 6; i++)
                conn_open(t, &c[i % 3], i, 0);
        conn_open(t, &c[3], 6, CTL_CONNS_CUT_ANON);
        for (int i = 7; i < 30; i++)
                conn_open(t, &c[i % 8], i, 0);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_ANON, NULL), 6);
        assert_int_equal(cuts.n, 24);
        for (int i = 0; i < 24; i++)
                assert_int_equal(cuts.fds[i], i);
        /* The owner's newcomer gets in (cutting the oldest), authenticates
         * and is never cut by what comes after. */
        uint64_t owner = conn_open(t, &c[0], 100, 0);
        assert_int_equal(cuts.fds[cuts.n - 1], 24);
        ctl_conns_authenticated(t, owner);
        for (int i = 0; i < 20; i++)
                conn_open(t, &c[i % 8], 200 + i, 0);
        for (int i = 0; i < cuts.n; i++)
                assert_int_not_equal(cuts.fds[i], 100);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_OWNER, NULL), 1);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_ANON, NULL), 6);
        ctl_conns_free(t);
}

static void test_conns_total_and_admit(void **state) {
        struct ctl_conns *t = conns_new(6, 2, 2, 2);
        struct ctl_client a = conn_client("192.0.2.1");
        uint64_t ids[6];
        for (int i = 0; i < 6; i++) {
                assert_true(ctl_conns_admit(t));
                ids[i] = conn_open(t, &a, i, 0);
                ctl_conns_authenticated(t, ids[i]);
        }
        assert_int_equal(cuts.n, 0);
        /* Every connection is the owner's: nothing to cut for a newcomer. */
        assert_false(ctl_conns_admit(t));
        /* One counted anyway (two listeners racing) is cut itself. */
        conn_open(t, &a, 50, CTL_CONNS_CUT_TOTAL);
        assert_int_equal(cuts.n, 1);
        assert_int_equal(cuts.fds[0], 50);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_N, NULL), 6);
        ctl_conns_close(t, ids[0]);
        assert_true(ctl_conns_admit(t));
        ctl_conns_free(t);
}

static void test_conns_table_full(void **state) {
        /* Cut connections keep their entry until closed: twice the total. */
        struct ctl_conns *t = conns_new(3, 1, 1, 1);
        struct ctl_client a = conn_client("192.0.2.1");
        uint64_t ids[6], id = 0;
        for (int i = 0; i < 6; i++)
                ids[i] = conn_open(t, &a, i, i == 1 ? CTL_CONNS_CUT_CLIENT : 0);
        assert_int_equal(cuts.n, 5);
        assert_int_equal(ctl_conns_open(t, &a, 9, 0, &id), -ENOSPC);
        assert_int_equal(id, 0);
        assert_int_equal(cuts.n, 5); /* the caller shuts that one down */
        ctl_conns_close(t, ids[0]);
        id = conn_open(t, &a, 10, 0);
        assert_int_not_equal(id, ids[0]); /* the entry is reused, the id is not */
        assert_int_equal(ctl_conns_count(t, CTL_POOL_N, &a), 1);
        ctl_conns_free(t);
}

static void test_conns_proxied_pool(void **state) {
        struct ctl_conns *t = conns_new(20, 4, 4, 2);
        struct ctl_client a = conn_client("192.0.2.1");
        uint64_t ticket[3] = {0}, id[3];
        bool report = true;
        for (int i = 0; i < 3; i++)
                id[i] = conn_open(t, &a, i, 0);
        assert_int_equal(ctl_conns_proxy_begin(t, id[0], &ticket[0], &report), 0);
        assert_false(report);
        assert_int_equal(ctl_conns_proxy_begin(t, id[1], &ticket[1], &report), 0);
        /* Full: refused, reported once, the connection stays anonymous. */
        assert_int_equal(ctl_conns_proxy_begin(t, id[2], &ticket[2], &report), -EBUSY);
        assert_true(report);
        assert_int_equal(ctl_conns_proxy_begin(t, id[2], &ticket[2], &report), -EBUSY);
        assert_false(report);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_PROXIED, NULL), 2);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_ANON, &a), 1);
        /* Held proxied answers are not anonymous: the client's newcomers are
         * not cut for them. */
        for (int i = 0; i < 3; i++)
                conn_open(t, &a, 10 + i, 0);
        assert_int_equal(cuts.n, 0);
        /* A stale ticket is ignored; the right one ends it. */
        assert_int_equal(ctl_conns_proxy_end(t, id[0], ticket[0] + 1000), 0);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_PROXIED, NULL), 2);
        ctl_conns_proxy_end(t, id[0], ticket[0]);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_PROXIED, NULL), 1);
        /* Back in the anonymous pool, over the client's cap: the oldest goes. */
        assert_int_equal(ctl_conns_count(t, CTL_POOL_ANON, &a), 4);
        assert_int_equal(cuts.n, 1);
        assert_int_equal(cuts.fds[0], 2);
        ctl_conns_proxy_end(t, id[0], ticket[0]); /* twice: nothing */
        assert_int_equal(ctl_conns_count(t, CTL_POOL_ANON, &a), 4);
        /* A proxied connection that closes leaves the pool; a late end of
         * its request changes nothing. */
        ctl_conns_close(t, id[1]);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_PROXIED, NULL), 0);
        ctl_conns_proxy_end(t, id[1], ticket[1]);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_N, NULL), 4);
        ctl_conns_free(t);
}

static void test_conns_keep_alive_mix(void **state) {
        /* One keep-alive connection carrying requests of every kind. */
        struct ctl_conns *t = conns_new(20, 4, 4, 2);
        struct ctl_client a = conn_client("192.0.2.1");
        uint64_t id = conn_open(t, &a, 7, 0), tk = 0;
        bool report;
#define POOLS(an, ow, px)                                                       \
        do {                                                                    \
                assert_int_equal(ctl_conns_count(t, CTL_POOL_ANON, NULL), an);  \
                assert_int_equal(ctl_conns_count(t, CTL_POOL_OWNER, NULL), ow); \
                assert_int_equal(ctl_conns_count(t, CTL_POOL_PROXIED, NULL), px); \
        } while (0)
        POOLS(1, 0, 0);
        assert_int_equal(ctl_conns_proxy_begin(t, id, &tk, &report), 0); /* GET / */
        assert_int_equal(ctl_conns_proxy_begin(t, id, &tk, &report), -EBUSY); /* never twice */
        POOLS(0, 0, 1);
        ctl_conns_proxy_end(t, id, tk);
        POOLS(1, 0, 0);
        ctl_conns_authenticated(t, id); /* GET /_seed/api/status, CLI token */
        POOLS(0, 1, 0);
        ctl_conns_authenticated(t, id);
        POOLS(0, 1, 0);
        assert_int_equal(ctl_conns_proxy_begin(t, id, &tk, &report), 0); /* GET / again */
        POOLS(0, 0, 1);
        ctl_conns_proxy_end(t, id, tk);
        POOLS(0, 1, 0); /* once the owner's, always */
        assert_int_equal(ctl_conns_proxy_begin(t, id, &tk, &report), 0);
        ctl_conns_close(t, id); /* closed mid-answer */
        POOLS(0, 0, 0);
        ctl_conns_proxy_end(t, id, tk);
        POOLS(0, 0, 0);
        assert_int_equal(cuts.n, 0);
#undef POOLS
        ctl_conns_free(t);
}

static void test_conns_head_deadline(void **state) {
        struct ctl_conns *t = conns_new(20, 4, 4, 2); /* heads within 1000 ms */
        struct ctl_client a = conn_client("192.0.2.1");
        int64_t next = 0;
        uint64_t slow = conn_open(t, &a, 1, 0);          /* opened at 0 */
        uint64_t quick = conn_open(t, &a, 2, 0);
        assert_int_equal(ctl_conns_reap(t, 999, &next), 0);
        assert_int_equal(next, 1000);
        ctl_conns_head_done(t, quick);                   /* its head is in */
        /* However it trickles, the slow head is cut at its deadline. */
        assert_int_equal(ctl_conns_reap(t, 1000, &next), 1);
        assert_int_equal(cuts.n, 1);
        assert_int_equal(cuts.fds[0], 1);
        assert_int_equal(next, INT64_MAX);
        assert_int_equal(ctl_conns_reap(t, 5000, &next), 0); /* a request in: no deadline */
        /* The request ends at 5000: the next head is due by 6000, also for
         * the owner's connections. */
        ctl_conns_authenticated(t, quick);
        ctl_conns_request_done(t, quick, 5000);
        assert_int_equal(ctl_conns_reap(t, 5999, &next), 0);
        assert_int_equal(next, 6000);
        assert_int_equal(ctl_conns_reap(t, 6000, &next), 1);
        assert_int_equal(cuts.fds[1], 2);
        assert_int_equal(ctl_conns_count(t, CTL_POOL_N, NULL), 0);
        ctl_conns_close(t, slow);
        ctl_conns_close(t, quick);
        ctl_conns_free(t);
}

/* ---- the logo ---- */

static int logo_root(const char *dir) {
        int fd = -1;
        assert_int_equal(fsx_open_root(dir, &fd), 0);
        return fd;
}

static void write_bytes(const char *dir, const char *rel, const void *data, size_t len) {
        _cleanup_free_ char *p = path_join(dir, rel);
        assert_int_equal(write_file_atomic(p, data, len, 0644), 0);
}

static const char PNG[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
static const char SVG[] = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 1 1\"/>";

static void test_logo_read(void **state) {
        char dir[] = "/tmp/seed-logo-XXXXXX";
        assert_non_null(mkdtemp(dir));
        int root = logo_root(dir);
        struct ctl_logo logo = {0};
        /* No knowledge/ yet, then an empty one: no logo. */
        assert_int_equal(ctl_logo_read(root, 0, &logo), -ENOENT);
        _cleanup_free_ char *kn = path_join(dir, "knowledge");
        assert_int_equal(mkdir(kn, 0755), 0);
        assert_int_equal(ctl_logo_read(root, 0, &logo), -ENOENT);
        assert_int_equal(ctl_logo_read(root, 1, &logo), -ENOENT);
        assert_int_equal(ctl_logo_read(root, 2, &logo), -EINVAL);

        /* A PNG: its signature, its type, an ETag of its content. */
        write_bytes(dir, "knowledge/logo.png", PNG, sizeof PNG - 1);
        assert_int_equal(ctl_logo_read(root, 1, &logo), 0);
        assert_string_equal(logo.ctype, "image/png");
        assert_int_equal(logo.len, sizeof PNG - 1);
        assert_memory_equal(logo.data, PNG, sizeof PNG - 1);
        char hex[SHA256_HEX_LEN + 1], etag[SHA256_HEX_LEN + 3];
        crypto_sha256_hex(PNG, sizeof PNG - 1, hex);
        snprintf(etag, sizeof etag, "\"%s\"", hex);
        assert_string_equal(logo.etag, etag);
        ctl_logo_done(&logo);
        assert_null(logo.data);

        /* A .png that is not one (an HTML page, a truncated signature). */
        write_bytes(dir, "knowledge/logo.png", "<html><script>alert(1)</script>", 31);
        assert_int_equal(ctl_logo_read(root, 1, &logo), -EBADMSG);
        write_bytes(dir, "knowledge/logo.png", PNG, 7);
        assert_int_equal(ctl_logo_read(root, 1, &logo), -EBADMSG);
        write_bytes(dir, "knowledge/logo.png", "", 0);
        assert_int_equal(ctl_logo_read(root, 1, &logo), -EBADMSG);

        /* An SVG. */
        write_bytes(dir, "knowledge/logo.svg", SVG, strlen(SVG));
        assert_int_equal(ctl_logo_read(root, 0, &logo), 0);
        assert_string_equal(logo.ctype, "image/svg+xml");
        assert_string_equal(logo.data, SVG);
        ctl_logo_done(&logo);

        /* Exactly 256 KiB is served, one byte more is not. */
        char *big = malloc(CTL_LOGO_MAX + 1);
        memcpy(big, PNG, sizeof PNG - 1);
        memset(big + sizeof PNG - 1, 'x', CTL_LOGO_MAX + 1 - (sizeof PNG - 1));
        write_bytes(dir, "knowledge/logo.png", big, CTL_LOGO_MAX);
        assert_int_equal(ctl_logo_read(root, 1, &logo), 0);
        assert_int_equal(logo.len, CTL_LOGO_MAX);
        ctl_logo_done(&logo);
        write_bytes(dir, "knowledge/logo.png", big, CTL_LOGO_MAX + 1);
        assert_int_equal(ctl_logo_read(root, 1, &logo), -EFBIG);
        free(big);

        /* A symlink to a host file, or to a file inside: refused. */
        _cleanup_free_ char *svg = path_join(dir, "knowledge/logo.svg");
        assert_int_equal(unlink(svg), 0);
        assert_int_equal(symlink("/etc/passwd", svg), 0);
        assert_int_equal(ctl_logo_read(root, 0, &logo), -ELOOP);
        assert_int_equal(unlink(svg), 0);
        write_bytes(dir, "knowledge/real.svg", SVG, strlen(SVG));
        assert_int_equal(symlink("real.svg", svg), 0);
        assert_int_equal(ctl_logo_read(root, 0, &logo), -ELOOP);
        assert_int_equal(unlink(svg), 0);
        /* A hard link (a second name for some file). */
        _cleanup_free_ char *real = path_join(dir, "knowledge/real.svg");
        assert_int_equal(link(real, svg), 0);
        assert_int_equal(ctl_logo_read(root, 0, &logo), -EMLINK);
        assert_int_equal(unlink(svg), 0);
        /* A FIFO is refused without blocking; so is a directory. */
        assert_int_equal(mkfifo(svg, 0644), 0);
        assert_int_equal(ctl_logo_read(root, 0, &logo), -EINVAL);
        assert_int_equal(unlink(svg), 0);
        assert_int_equal(mkdir(svg, 0755), 0);
        assert_true(ctl_logo_read(root, 0, &logo) == -EISDIR || ctl_logo_read(root, 0, &logo) == -EINVAL);
        assert_int_equal(rmdir(svg), 0);

        /* knowledge/ itself a link out of the folder: refused, not followed. */
        char other[] = "/tmp/seed-logo-other-XXXXXX";
        assert_non_null(mkdtemp(other));
        write_bytes(other, "logo.svg", SVG, strlen(SVG));
        _cleanup_free_ char *moved = path_join(dir, "knowledge.old");
        assert_int_equal(rename(kn, moved), 0);
        assert_int_equal(symlink(other, kn), 0);
        assert_int_equal(ctl_logo_read(root, 0, &logo), -ELOOP);
        assert_int_equal(unlink(kn), 0);
        /* knowledge a plain file: no logo in it. */
        write_bytes(dir, "knowledge", "x", 1);
        assert_int_equal(ctl_logo_read(root, 0, &logo), -ENOENT);

        assert_string_equal(ctl_logo_refusal(-ELOOP), "is a symlink or leads outside the Seed folder");
        assert_string_equal(ctl_logo_refusal(-EFBIG), "is larger than 256 KiB");
        close(root);
        assert_int_equal(rm_rf(dir), 0);
        assert_int_equal(rm_rf(other), 0);
}

/* ---- listening sockets handed over by the supervisor ---- */

static int tcp_socket(int family, bool do_listen, uint16_t port) {
        int fd = socket(family, SOCK_STREAM, 0); /* no O_CLOEXEC: as inherited */
        assert_true(fd >= 0);
        struct sockaddr_storage ss = {.ss_family = (sa_family_t)family};
        socklen_t sl = sizeof(struct sockaddr_in);
        if (family == AF_INET6) {
                int one = 1;
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
                ((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
                ((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
                sl = sizeof(struct sockaddr_in6);
        } else {
                ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                ((struct sockaddr_in *)&ss)->sin_port = htons(port);
        }
        if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || (do_listen && listen(fd, 1) < 0)) {
                close(fd);
                return -errno;
        }
        return fd;
}

static void test_listen_adopt_takes_only_listening_tcp(void **state) {
        struct ctl_listen l = CTL_LISTEN_INIT;
        int bound = tcp_socket(AF_INET, false, 0);
        int udp = socket(AF_INET, SOCK_DGRAM, 0);
        int unix_listening = socket(AF_UNIX, SOCK_STREAM, 0);
        int pipefd[2];
        assert_int_equal(pipe(pipefd), 0);
        struct sockaddr_un un = {.sun_family = AF_UNIX}; /* autobind: an abstract name */
        assert_int_equal(bind(unix_listening, (struct sockaddr *)&un, sizeof(sa_family_t)), 0);
        assert_int_equal(listen(unix_listening, 1), 0);
        assert_int_equal(ctl_listen_adopt(&l, bound), -EINVAL);          /* not listening */
        assert_int_equal(ctl_listen_adopt(&l, udp), -EINVAL);            /* not TCP */
        assert_int_equal(ctl_listen_adopt(&l, unix_listening), -EINVAL); /* not IP */
        assert_int_equal(ctl_listen_adopt(&l, pipefd[0]), -ENOTSOCK);
        assert_int_equal(ctl_listen_adopt(&l, 1000), -EBADF);
        assert_int_equal(l.n, 0);

        int v4 = tcp_socket(AF_INET, true, 0);
        assert_int_equal(ctl_listen_adopt(&l, v4), 0);
        assert_int_equal(l.n, 1);
        assert_true(l.port > 0);
        assert_true(fcntl(v4, F_GETFD) & FD_CLOEXEC); /* nothing the kernel starts gets it */
        assert_true(fcntl(v4, F_GETFL) & O_NONBLOCK);
        assert_int_equal(ctl_listen_adopt(&l, v4), -EINVAL);              /* twice */
        int v4b = tcp_socket(AF_INET, true, 0);
        assert_int_equal(ctl_listen_adopt(&l, v4b), -EINVAL);             /* another port, same family */
        int v6 = tcp_socket(AF_INET6, true, l.port);
        if (v6 >= 0) {
                assert_int_equal(ctl_listen_adopt(&l, v6), 0);
                assert_int_equal(l.n, 2);
                int v6b = tcp_socket(AF_INET6, true, 0);
                assert_int_equal(ctl_listen_adopt(&l, v6b), -E2BIG);
                close(v6b);
        }
        ctl_listen_close(&l);
        assert_int_equal(l.n, 0);
        assert_true(fcntl(v4, F_GETFD) < 0); /* closed with l */
        close(v4b);
        close(bound);
        close(udp);
        close(unix_listening);
        close(pipefd[0]);
        close(pipefd[1]);
}

static void test_listen_open(void **state) {
        static const char *const bad[] = {"", "127.0.0.1", "[::1", "[::1]8080", "127.0.0.1:x", "127.0.0.1:70000"};
        struct ctl_listen l = CTL_LISTEN_INIT;
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_int_equal(ctl_listen_open(bad[i], &l), -EINVAL);
        assert_true(ctl_listen_is_loopback("localhost") && ctl_listen_is_loopback("::1") &&
                    ctl_listen_is_loopback("127.0.0.1"));
        assert_false(ctl_listen_is_loopback("0.0.0.0") || ctl_listen_is_loopback("127.0.0.2") ||
                     ctl_listen_is_loopback("localhost.evil.com"));
        /* localhost: both families on one port (one when the host has no IPv6) */
        assert_int_equal(ctl_listen_open("localhost:0", &l), 0);
        assert_true(l.n >= 1 && l.port > 0);
        int probe = tcp_socket(AF_INET6, true, 0);
        if (probe >= 0) {
                close(probe);
                assert_int_equal(l.n, 2);
        }
        struct ctl_listen again = CTL_LISTEN_INIT;
        char addr[32];
        snprintf(addr, sizeof addr, "127.0.0.1:%u", l.port);
        assert_int_equal(ctl_listen_open(addr, &again), -EADDRINUSE); /* never the next port */
        assert_int_equal(again.n, 0);
        ctl_listen_close(&l);
        /* not loopback: exactly the address given */
        assert_int_equal(ctl_listen_open("0.0.0.0:0", &l), 0);
        assert_int_equal(l.n, 1);
        ctl_listen_close(&l);
}

static struct sockaddr_storage sa_of(const char *ip) {
        struct sockaddr_storage ss = {0};
        struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
        if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1)
                v4->sin_family = AF_INET;
        else if (inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1)
                v6->sin6_family = AF_INET6;
        else
                fail_msg("bad test address %s", ip);
        return ss;
}

static bool own(const struct ctl_own_addrs *a, const char *ip) {
        struct sockaddr_storage ss = sa_of(ip);
        return ctl_own_addrs_match(a, (struct sockaddr *)&ss);
}

/* Inside the container: loopback always counts as its own (any 127/8,
 * ::1, and the IPv4-mapped forms a dual-stack socket reports); an address
 * of its own interfaces counts in either form; the bridge's gateway, where
 * the owner's connections arrive from, and other hosts do not. */
static void test_own_addrs_match(void **state) {
        struct ctl_own_addrs a = {0};
        struct sockaddr_storage eth0 = sa_of("10.88.0.5"), v6 = sa_of("fd00::5");
        assert_int_equal(ctl_own_addrs_add(&a, (struct sockaddr *)&eth0), 0);
        assert_int_equal(ctl_own_addrs_add(&a, (struct sockaddr *)&eth0), 0); /* once */
        assert_int_equal(ctl_own_addrs_add(&a, (struct sockaddr *)&v6), 0);
        assert_int_equal(a.n, 2);
        static const char *const inside[] = {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1",
                                             "10.88.0.5", "::ffff:10.88.0.5", "fd00::5"};
        static const char *const outside[] = {"10.88.0.1", "::ffff:10.88.0.1", "192.168.1.10", "fd00::1",
                                              "::", "0.0.0.0", "::127.0.0.1", "128.0.0.1"};
        for (size_t i = 0; i < ARRAY_SIZE(inside); i++)
                if (!own(&a, inside[i]))
                        fail_msg("%s should count as the container's own", inside[i]);
        for (size_t i = 0; i < ARRAY_SIZE(outside); i++)
                if (own(&a, outside[i]))
                        fail_msg("%s should not count as the container's own", outside[i]);
        struct sockaddr_un un = {.sun_family = AF_UNIX};
        assert_false(ctl_own_addrs_match(&a, (struct sockaddr *)&un));
        assert_false(ctl_own_addrs_match(&a, NULL));
        struct ctl_own_addrs empty = {0};
        assert_true(own(&empty, "127.0.0.1"));
        assert_false(own(&empty, "10.88.0.5"));
}

/* The list is bounded: one address more than it holds is an error (the
 * caller refuses every connection then), never a silent cut. */
static void test_own_addrs_bounded(void **state) {
        struct ctl_own_addrs a = {0};
        for (unsigned i = 0; i < CTL_OWN_ADDRS_MAX; i++) {
                struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a000001u + i)};
                assert_int_equal(ctl_own_addrs_add(&a, (struct sockaddr *)&sa), 0);
        }
        struct sockaddr_in more = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0b000001u)};
        assert_int_equal(ctl_own_addrs_add(&a, (struct sockaddr *)&more), -E2BIG);
        assert_int_equal(a.n, CTL_OWN_ADDRS_MAX);
}

/* The real interfaces: lo's 127.0.0.1 is among them, stamped with now. */
static void test_own_addrs_load(void **state) {
        struct ctl_own_addrs a = {0};
        assert_int_equal(ctl_own_addrs_load(&a, 1234), 0);
        assert_int_equal(a.loaded_ms, 1234);
        assert_true(a.n >= 1);
        bool lo = false;
        for (size_t i = 0; i < a.n; i++)
                lo |= a.addr[i][10] == 0xff && a.addr[i][11] == 0xff && a.addr[i][12] == 127;
        assert_true(lo);
}


/* ---- the badge's script tag (inject.h) ---- */

static struct ctl_hdrs hdrs_of(const char *const *kv) {
        struct ctl_hdrs h = {0};
        for (; kv && kv[0]; kv += 2)
                assert_int_equal(ctl_hdrs_add(&h, kv[0], kv[1]), 0);
        return h;
}

static bool wanted(const char *method, const char *const *req, int status, const char *const *up, bool body) {
        struct ctl_hdrs rq = hdrs_of(req), u = hdrs_of(up);
        bool w = ctl_inject_wanted(method, &rq, status, &u, body);
        ctl_hdrs_free(&rq);
        ctl_hdrs_free(&u);
        return w;
}

static void test_inject_wanted(void **state) {
        (void)state;
        const char *nav[] = {"Sec-Fetch-Dest", "document", "Sec-Fetch-Mode", "navigate", NULL};
        const char *html[] = {"Content-Type", "text/html; charset=utf-8", NULL};
        assert_true(wanted("GET", nav, 200, html, true));
        const char *html_len[] = {"Content-Type", "TEXT/HTML", "Content-Length", "1200", NULL};
        assert_true(wanted("GET", nav, 200, html_len, true));
        const char *identity[] = {"Content-Type", "text/html", "Content-Encoding", "identity", NULL};
        assert_true(wanted("GET", nav, 200, identity, true));
        /* compressed, partial, large, not HTML */
        const char *gzip[] = {"Content-Type", "text/html", "Content-Encoding", "gzip", NULL};
        assert_false(wanted("GET", nav, 200, gzip, true));
        const char *br[] = {"Content-Type", "text/html", "Content-Encoding", "identity", "Content-Encoding", "br", NULL};
        assert_false(wanted("GET", nav, 200, br, true));
        const char *ranged[] = {"Content-Type", "text/html", "Content-Range", "bytes 0-9/100", NULL};
        assert_false(wanted("GET", nav, 200, ranged, true));
        assert_false(wanted("GET", nav, 206, html, true));
        const char *big[] = {"Content-Type", "text/html", "Content-Length", "8388608", NULL};
        assert_false(wanted("GET", nav, 200, big, true));
        const char *under[] = {"Content-Type", "text/html", "Content-Length", "8388607", NULL};
        assert_true(wanted("GET", nav, 200, under, true));
        const char *odd_len[] = {"Content-Type", "text/html", "Content-Length", "+12", NULL};
        assert_false(wanted("GET", nav, 200, odd_len, true));
        const char *json[] = {"Content-Type", "application/json", NULL};
        assert_false(wanted("GET", nav, 200, json, true));
        const char *xhtml[] = {"Content-Type", "text/htmlx", NULL};
        assert_false(wanted("GET", nav, 200, xhtml, true));
        const char *none[] = {NULL};
        assert_false(wanted("GET", nav, 200, none, true));
        const char *two[] = {"Content-Type", "text/html", "Content-Type", "text/plain", NULL};
        assert_false(wanted("GET", nav, 200, two, true));
        /* only top-level navigations of a browser that says so */
        const char *frame[] = {"Sec-Fetch-Dest", "iframe", "Sec-Fetch-Mode", "navigate", NULL};
        assert_false(wanted("GET", frame, 200, html, true));
        const char *fetch[] = {"Sec-Fetch-Dest", "empty", "Sec-Fetch-Mode", "cors", NULL};
        assert_false(wanted("GET", fetch, 200, html, true));
        const char *old[] = {NULL};
        assert_false(wanted("GET", old, 200, html, true));
        assert_false(wanted("HEAD", nav, 200, html, true));
        assert_false(wanted("POST", nav, 200, html, true));
        assert_false(wanted("GET", nav, 200, html, false));
        assert_false(wanted("GET", nav, 304, html, true));
        assert_false(wanted("GET", nav, 404, html, true));
}

/* What the proxy sends for doc fed in pieces of at most step bytes. */
static char *rewrite(const char *doc, size_t step) {
        struct ctl_inject s;
        ctl_inject_init(&s);
        struct buf out = BUF_INIT(SIZE_MAX);
        size_t n = strlen(doc);
        for (size_t pos = 0; pos < n; pos += step) {
                size_t k = n - pos < step ? n - pos : step, at = 0;
                if (ctl_inject_feed(&s, doc + pos, k, &at) == CTL_INJECT_HERE) {
                        assert_true(at <= k);
                        assert_int_equal(buf_append(&out, doc + pos, at), 0);
                        assert_int_equal(buf_puts(&out, CTL_INJECT_TAG), 0);
                        assert_int_equal(buf_append(&out, doc + pos + at, k - at), 0);
                } else
                        assert_int_equal(buf_append(&out, doc + pos, k), 0);
        }
        if (ctl_inject_at_end(&s))
                assert_int_equal(buf_puts(&out, CTL_INJECT_TAG), 0);
        assert_int_equal(buf_puts(&out, ""), 0);
        return buf_steal(&out);
}

/* doc with the tag where "@" is (or at the end), for every piece size. */
static void check_rewrite(const char *marked) {
        const char *at = strchr(marked, '@');
        _cleanup_free_ char *doc = NULL, *want = NULL;
        size_t pre = at ? (size_t)(at - marked) : strlen(marked);
        assert_true(xasprintf(&doc, "%.*s%s", (int)pre, marked, at ? at + 1 : "") >= 0);
        assert_true(xasprintf(&want, "%.*s%s%s", (int)pre, marked, CTL_INJECT_TAG, at ? at + 1 : "") >= 0);
        for (size_t step = 1; step <= strlen(doc) + 1; step++) {
                _cleanup_free_ char *got = rewrite(doc, step);
                assert_string_equal(got, want);
        }
}

static void test_inject_place(void **state) {
        (void)state;
        check_rewrite("<!doctype html><html><head>@<title>t</title></head><body>x</body></html>");
        check_rewrite("<!DOCTYPE html>\n<HTML lang=en><HEAD class=\"a>b\" data-x='<body>'>@<meta charset=utf-8>");
        check_rewrite("<html><!-- <head> --><head >@</head>");
        check_rewrite("<html><!----><!-- a -- b --><head/>@");
        check_rewrite("<html><header>not it</header><body onload=\"x>1\">@<p>hi</p>");
        check_rewrite("<p>no head, no body</p>@");               /* the tag at the end */
        check_rewrite("@");                                      /* empty: still one tag */
        check_rewrite("<headline><bodyguard>text</bodyguard>@");
        check_rewrite("</head><head>@");                        /* an end tag is not a start */
        check_rewrite("<?xml version=\"1.0\"?><body>@");
        check_rewrite("<<head>@x");
        check_rewrite("<head\n\tdata-a=1>@");
}

/* doc gets no tag at all, for every piece size. */
static void check_untouched(const char *doc) {
        for (size_t step = 1; step <= strlen(doc) + 1; step++) {
                _cleanup_free_ char *got = rewrite(doc, step);
                assert_string_equal(got, doc);
        }
}

/* Raw text (script, style, and the rest of HTML's raw text and RCDATA
 * elements) ends only at its own end tag: a "</head>" or "<body" inside an
 * inline script or style is not the page's. */
static void test_inject_raw_text(void **state) {
        (void)state;
        check_rewrite("<html><script>document.write('<body>')</script><head>@<title>t</title>");
        check_rewrite("<script>var s = \"</head><body class=x>\";</script><body>@x");
        check_rewrite("<SCRIPT type=module>if (a<b) x('<head>')</ScRiPt ><head>@");
        check_rewrite("<script>'</scripty><body>'</script/><body>@");
        check_rewrite("<style>p::after{content:'<body>'}</style><body>@");
        check_rewrite("<title><head></title><head>@");
        check_rewrite("<textarea><body></textarea ><body>@");
        check_rewrite("<noscript><body></noscript><body>@");
        check_rewrite("<xmp><head></xmp><iframe><body></iframe><noembed><head></noembed><noframes><body></noframes><head>@");
        check_rewrite("<script><!-- <body> --></script><!-- <script> --><head>@");
        check_rewrite("<scripts><body>@");                      /* not a raw text element */
        check_rewrite("<script></script>@");                    /* closed: the tag at the end */
        /* An unclosed raw text element swallows the rest of the page, and
         * anything added at its end would show as text (or be no script). */
        check_untouched("<html><script>var x = '<body>';");
        check_untouched("<textarea><head></textare");
        check_untouched("<plaintext><head><body>");
}

static void test_inject_once_and_limits(void **state) {
        (void)state;
        struct ctl_inject s;
        size_t at = 99;
        ctl_inject_init(&s);
        assert_int_equal(ctl_inject_feed(&s, "<head>", 6, &at), CTL_INJECT_HERE);
        assert_int_equal(at, 6);
        assert_int_equal(ctl_inject_feed(&s, "<body>", 6, &at), CTL_INJECT_GIVE_UP);
        assert_false(ctl_inject_at_end(&s));

        /* A page larger than CTL_INJECT_MAX without a place: nothing is added. */
        size_t block = 64 * 1024;
        _cleanup_free_ char *text = malloc(block);
        memset(text, 'x', block);
        ctl_inject_init(&s);
        enum ctl_inject_verdict v = CTL_INJECT_MORE;
        for (size_t done = 0; done < CTL_INJECT_MAX && v == CTL_INJECT_MORE; done += block)
                v = ctl_inject_feed(&s, text, block, &at);
        assert_int_equal(v, CTL_INJECT_MORE);
        assert_int_equal(ctl_inject_feed(&s, "<head>", 6, &at), CTL_INJECT_GIVE_UP);
        assert_false(ctl_inject_at_end(&s));

        /* A place found just under the limit still counts. */
        ctl_inject_init(&s);
        for (size_t done = 0; done + block <= CTL_INJECT_MAX - block; done += block)
                assert_int_equal(ctl_inject_feed(&s, text, block, &at), CTL_INJECT_MORE);
        assert_int_equal(ctl_inject_feed(&s, "<body>", 6, &at), CTL_INJECT_HERE);

        /* A NUL or binary bytes do not stop the scan. */
        ctl_inject_init(&s);
        assert_int_equal(ctl_inject_feed(&s, "\0\xff<", 3, &at), CTL_INJECT_MORE);
        assert_int_equal(ctl_inject_feed(&s, "body>", 5, &at), CTL_INJECT_HERE);
        assert_int_equal(at, 5);
}


/* The paths "Open the app" and #ask= may carry (badge.h). */
static void test_badge_path(void **state) {
        (void)state;
        static const char *const good[] = {"/", "/todos/list", "/a-b_c.d~e!$&'()*+,;=:@%20", "/x/"};
        static const char *const bad[] = {NULL, "", "todos", "//evil.com/", "/\\evil.com", "/_seed/", "/_seed",
                                          "/_seedx", "/a b", "/a\nb", "/a\"b", "/a<b", "http://x/", "/a?b", "/a#b"};
        for (size_t i = 0; i < ARRAY_SIZE(good); i++)
                assert_true(ctl_badge_path_ok(good[i]));
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_false(ctl_badge_path_ok(bad[i]));
        char longest[CTL_BADGE_PATH_MAX + 2];
        memset(longest, 'a', sizeof longest);
        longest[0] = '/';
        longest[CTL_BADGE_PATH_MAX] = 0;
        assert_true(ctl_badge_path_ok(longest));
        longest[CTL_BADGE_PATH_MAX] = 'a';
        longest[CTL_BADGE_PATH_MAX + 1] = 0;
        assert_false(ctl_badge_path_ok(longest));
}

/* front.h: the pool from a connection's first bytes. */
/* fast.h: only a strictly formed GET with one Host, whole and alone, is
 * the fast path's; everything else is libmicrohttpd's, at once or once it
 * is whole. */
static void test_fast_parse(void **state) {
        static const struct {
                const char *head;
                enum ctl_fast_verdict v;
        } cases[] = {
                {"GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n", CTL_FAST_OURS},
                {"GET /a/b?c=d&e HTTP/1.1\r\nhost:\t x \t\r\nAccept: */*\r\nX-Empty:\r\n\r\n", CTL_FAST_OURS},
                {"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n", CTL_FAST_OURS},
                {"GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n", CTL_FAST_OURS},
                {"GET / HTTP/1.1\r\nHost: a\r\nX-Utf8: \xc3\xa9t\xc3\xa9\r\n\r\n", CTL_FAST_OURS},
                /* Not whole yet. */
                {"GET / HTTP/1.1\r\nHost: a\r\n", CTL_FAST_WAIT},
                {"GE", CTL_FAST_WAIT},
                {"", CTL_FAST_WAIT},
                /* A blank line alone (fuzz-ctl-fast: was read past). */
                {"\r\n\r\n", CTL_FAST_DAEMON},
                /* Another method, version or form of target. */
                {"POST", CTL_FAST_DAEMON},
                {"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n", CTL_FAST_DAEMON},
                {"get / HTTP/1.1\r\nHost: a\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.0\r\nHost: a\r\n\r\n", CTL_FAST_DAEMON},
                {"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", CTL_FAST_DAEMON},
                {"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", CTL_FAST_DAEMON},
                {"GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", CTL_FAST_DAEMON},
                {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", CTL_FAST_DAEMON},
                /* Hosts: none, two. */
                {"GET / HTTP/1.1\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost: a\r\nHOST: a\r\n\r\n", CTL_FAST_DAEMON},
                /* A body, or a header the daemon decides on. */
                {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost: a\r\nService-Worker: script\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, TE\r\n\r\n", CTL_FAST_DAEMON},
                /* Line ends other than CRLF, folds, control characters, bad names. */
                {"GET / HTTP/1.1\nHost: a\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01" "b\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost: a\r\nX: a\x7f\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHo(st: a\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\n: a\r\nHost: a\r\n\r\n", CTL_FAST_DAEMON},
                /* More than one head: a pipelined request, or body bytes. */
                {"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", CTL_FAST_DAEMON},
                {"GET / HTTP/1.1\r\nHost: a\r\n\r\nx", CTL_FAST_DAEMON},
        };
        struct ctl_hdrs h = {0};
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                const char *in = cases[i].head;
                struct ctl_fast_head head;
                enum ctl_fast_verdict v = ctl_fast_parse(in, strlen(in), false, &head, &h);
                if (v != cases[i].v)
                        fail_msg("case %zu: %d, not %d", i, v, cases[i].v);
                if (v == CTL_FAST_OURS) {
                        assert_int_equal(head.len, strlen(in));
                        assert_int_equal(ctl_hdrs_count(&h, "Host"), 1);
                } else
                        assert_int_equal(h.n, 0);
                /* Nothing more will come: never left waiting. */
                v = ctl_fast_parse(in, strlen(in), true, &head, &h);
                assert_int_not_equal(v, CTL_FAST_WAIT);
        }
        /* The parts: the target as sent, values without their blanks, names as sent. */
        const char *in = "GET /x?y=%20 HTTP/1.1\r\nhost:\t h:1 \r\nX-A:  b c \r\nConnection: close\r\n\r\n";
        struct ctl_fast_head head;
        assert_int_equal(ctl_fast_parse(in, strlen(in), false, &head, &h), CTL_FAST_OURS);
        assert_int_equal(head.target_len, strlen("/x?y=%20"));
        assert_memory_equal(head.target, "/x?y=%20", head.target_len);
        assert_true(head.close);
        assert_string_equal(ctl_hdrs_get(&h, "Host"), "h:1");
        assert_string_equal(ctl_hdrs_get(&h, "x-a"), "b c");
        assert_string_equal(h.v[0].name, "host");
        /* A target past CTL_FAST_TARGET_MAX, and more headers than CTL_MAX_HEADERS. */
        struct buf b = BUF_INIT(1 << 20);
        assert_int_equal(buf_puts(&b, "GET /"), 0);
        for (int i = 0; i < CTL_FAST_TARGET_MAX; i++)
                assert_int_equal(buf_puts(&b, "a"), 0);
        assert_int_equal(buf_puts(&b, " HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
        assert_int_equal(ctl_fast_parse(b.data, b.len, false, &head, &h), CTL_FAST_DAEMON);
        b.len = 0;
        assert_int_equal(buf_puts(&b, "GET / HTTP/1.1\r\nHost: a\r\n"), 0);
        for (int i = 0; i < CTL_MAX_HEADERS; i++)
                assert_int_equal(buf_printf(&b, "X-%d: v\r\n", i), 0);
        assert_int_equal(buf_puts(&b, "\r\n"), 0);
        assert_int_equal(ctl_fast_parse(b.data, b.len, false, &head, &h), CTL_FAST_DAEMON);
        assert_int_equal(h.n, 0);
        buf_free(&b);
        ctl_hdrs_free(&h);
}

static void test_front_choose(void **state) {
        static const struct {
                const char *head;
                enum ctl_front_pool pool;
        } cases[] = {
                /* The organism's origins, complete heads: small. */
                {"GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n", CTL_FRONT_SMALL},
                {"GET / HTTP/1.1\r\nAccept: */*\r\nhOsT:\t localhost:1 \r\nX: y\r\n\r\n", CTL_FRONT_SMALL},
                {"GET / HTTP/1.1\r\nHost: organism.localhost:9\r\n\r\nGET /more", CTL_FRONT_SMALL},
                /* The control plane's own origin, any case, with or without a port: large. */
                {"GET / HTTP/1.1\r\nHost: seed.localhost:8080\r\n\r\n", CTL_FRONT_LARGE},
                {"GET / HTTP/1.1\r\nHost: SEED.localhost\r\n\r\n", CTL_FRONT_LARGE},
                /* No Host, two, a folded one, an empty one: large (refused there). */
                {"GET / HTTP/1.0\r\n\r\n", CTL_FRONT_LARGE},
                {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", CTL_FRONT_LARGE},
                {"GET / HTTP/1.1\r\nHost: a\r\n seed.localhost\r\n\r\n", CTL_FRONT_LARGE},
                {"GET / HTTP/1.1\r\nHost:  \r\n\r\n", CTL_FRONT_LARGE},
                /* A header that only ends like Host is not one. */
                {"GET / HTTP/1.1\r\nX-Host: a\r\nHost: seed.localhost\r\n\r\n", CTL_FRONT_LARGE},
                {"GET / HTTP/1.1\r\nX-Host: seed.localhost\r\nHost: a\r\n\r\n", CTL_FRONT_SMALL},
                /* Not complete yet: wait. */
                {"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n", CTL_FRONT_WAIT},
                {"", CTL_FRONT_WAIT},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                const char *h = cases[i].head;
                enum ctl_front_pool got = ctl_front_choose(h, strlen(h), false, "seed.localhost");
                if (got != cases[i].pool)
                        fail_msg("case %zu: %d, not %d", i, got, cases[i].pool);
                /* Unless no more will come or fit; and without an origin of
                 * its own (the same-origin fallback) always large. */
                enum ctl_front_pool full = ctl_front_choose(h, strlen(h), true, "seed.localhost");
                assert_int_equal(full, cases[i].pool == CTL_FRONT_WAIT ? CTL_FRONT_LARGE : cases[i].pool);
                assert_int_equal(ctl_front_choose(h, strlen(h), false, NULL),
                                 cases[i].pool == CTL_FRONT_WAIT ? CTL_FRONT_WAIT : CTL_FRONT_LARGE);
                assert_int_equal(ctl_front_choose(h, strlen(h), true, ""), CTL_FRONT_LARGE);
        }
        char longhost[400]; /* longer than a Host is read */
        snprintf(longhost, sizeof longhost, "GET / HTTP/1.1\r\nHost: %0301d\r\n\r\n", 1);
        assert_int_equal(ctl_front_choose(longhost, strlen(longhost), false, "seed.localhost"), CTL_FRONT_LARGE);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_own_addrs_match),
                cmocka_unit_test(test_own_addrs_bounded),
                cmocka_unit_test(test_own_addrs_load),
                cmocka_unit_test(test_host_allowed_defaults),
                cmocka_unit_test(test_host_refused),
                cmocka_unit_test(test_host_allowed_extra),
                cmocka_unit_test(test_host_organism),
                cmocka_unit_test(test_admin_origin),
                cmocka_unit_test(test_fetch_nav),
                cmocka_unit_test(test_same_origin),
                cmocka_unit_test(test_content_type_and_methods),
                cmocka_unit_test(test_path_classify),
                cmocka_unit_test(test_target_clean),
                cmocka_unit_test(test_query),
                cmocka_unit_test(test_cookie_header),
                cmocka_unit_test(test_cookie_foreign),
                cmocka_unit_test(test_cookie_name),
                cmocka_unit_test(test_api_token),
                cmocka_unit_test(test_cookie_values),
                cmocka_unit_test(test_cookie_strip),
                cmocka_unit_test(test_hdrs_text_blocks),
                cmocka_unit_test(test_proxy_request_head),
                cmocka_unit_test(test_proxy_request_keeps_other_auth),
                cmocka_unit_test(test_proxy_drops_non_token_names),
                cmocka_unit_test(test_proxy_drops_cli_token_with_whitespace),
                cmocka_unit_test(test_auth_bearer),
                cmocka_unit_test(test_set_cookie_name),
                cmocka_unit_test(test_proxy_drops_control_chars_in_values),
                cmocka_unit_test(test_request_framing),
                cmocka_unit_test(test_proxy_request_head_framing),
                cmocka_unit_test(test_proxy_parse_head),
                cmocka_unit_test(test_proxy_response_policy),
                cmocka_unit_test(test_proxy_response_cache_headers),
                cmocka_unit_test(test_chunked),
                cmocka_unit_test(test_pages),
                cmocka_unit_test(test_escaping),
                cmocka_unit_test(test_security_headers),
                cmocka_unit_test(test_ip_parse),
                cmocka_unit_test(test_client_grouping),
                cmocka_unit_test(test_proxies_parse),
                cmocka_unit_test(test_client_of),
                cmocka_unit_test(test_limiter_per_client),
                cmocka_unit_test(test_limiter_success_and_links),
                cmocka_unit_test(test_limiter_parallel_attempts),
                cmocka_unit_test(test_limiter_limited_client_adds_nothing_overall),
                cmocka_unit_test(test_limiter_overall),
                cmocka_unit_test(test_limiter_eviction),
                cmocka_unit_test(test_limiter_all_slots_busy),
                cmocka_unit_test(test_owner),
                cmocka_unit_test(test_sign_in_pages),
                cmocka_unit_test(test_ip_from_sockaddr),
                cmocka_unit_test(test_proxies_trusts),
                cmocka_unit_test(test_conns_limits_checked),
                cmocka_unit_test(test_conns_cut_oldest_of_client),
                cmocka_unit_test(test_conns_untrusted_grouping),
                cmocka_unit_test(test_conns_cut_oldest_in_all),
                cmocka_unit_test(test_conns_total_and_admit),
                cmocka_unit_test(test_conns_table_full),
                cmocka_unit_test(test_conns_proxied_pool),
                cmocka_unit_test(test_conns_keep_alive_mix),
                cmocka_unit_test(test_proxy_request_head_keep_alive),
                cmocka_unit_test(test_proxy_parse_head_keep_alive),
                cmocka_unit_test(test_upstream_pool),
                cmocka_unit_test(test_session_cache),
                cmocka_unit_test(test_conns_head_deadline),
                cmocka_unit_test(test_logo_read),
                cmocka_unit_test(test_inject_wanted),
                cmocka_unit_test(test_badge_path),
                cmocka_unit_test(test_inject_place),
                cmocka_unit_test(test_inject_raw_text),
                cmocka_unit_test(test_inject_once_and_limits),
                cmocka_unit_test(test_listen_adopt_takes_only_listening_tcp),
                cmocka_unit_test(test_listen_open),
                cmocka_unit_test(test_front_choose),
                cmocka_unit_test(test_fast_parse),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
