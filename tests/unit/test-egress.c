/* Unit tests of the egress proxy's pure parts: the address table, IP
 * literals in every spelling, internal names, host patterns and the
 * allowlist, the CONNECT head parser and the ClientHello parser; and the
 * proxy object without any connection. (Connections through the real
 * proxy: tests/integration/test-egress.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "egress/addr.h"
#include "egress/egress.h"
#include "egress/hello.h"
#include "egress/policy.h"
#include "egress/request.h"

#include "../common/tlshello.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>

/* ---- Address classes ---- */

#define C(a, k) {a, EGRESS_ADDR_##k}
static const struct {
        const char *addr;
        enum egress_addr_class class;
} addr_cases[] = {
        C("0.0.0.0", UNSPECIFIED),
        C("0.1.2.3", RESERVED),
        C("10.0.0.1", PRIVATE),
        C("10.255.255.255", PRIVATE),
        C("100.64.0.1", CGNAT),
        C("100.127.255.255", CGNAT),
        C("100.63.255.255", PUBLIC),
        C("100.128.0.1", PUBLIC),
        C("127.0.0.1", LOOPBACK),
        C("127.255.255.254", LOOPBACK),
        C("169.254.169.254", LINK_LOCAL),
        C("172.16.0.1", PRIVATE),
        C("172.31.255.255", PRIVATE),
        C("172.15.255.255", PUBLIC),
        C("172.32.0.1", PUBLIC),
        C("192.0.0.1", RESERVED),
        C("192.0.0.170", RESERVED),
        C("192.0.2.1", DOCUMENTATION),
        C("192.88.99.1", RESERVED),
        C("192.168.1.1", PRIVATE),
        C("198.18.0.1", BENCHMARKING),
        C("198.19.255.255", BENCHMARKING),
        C("198.20.0.1", PUBLIC),
        C("198.51.100.7", DOCUMENTATION),
        C("203.0.113.9", DOCUMENTATION),
        C("224.0.0.1", MULTICAST),
        C("239.255.255.250", MULTICAST),
        C("233.252.0.1", DOCUMENTATION),
        C("240.0.0.1", RESERVED),
        C("255.255.255.255", RESERVED),
        C("8.8.8.8", PUBLIC),
        C("93.184.215.14", PUBLIC),
        C("1.1.1.1", PUBLIC),
        C("::", UNSPECIFIED),
        C("::1", LOOPBACK),
        C("::2", TRANSLATED),                 /* compatible 0.0.0.2 */
        C("::127.0.0.1", TRANSLATED),         /* compatible */
        C("::8.8.8.8", TRANSLATED),          /* compatible: no host has one */
        C("::ffff:127.0.0.1", TRANSLATED),    /* mapped */
        C("::ffff:10.0.0.1", TRANSLATED),
        C("::ffff:169.254.169.254", TRANSLATED),
        C("::ffff:100.64.0.1", TRANSLATED),
        C("::ffff:8.8.8.8", PUBLIC),
        C("::ffff:0:127.0.0.1", TRANSLATED),  /* SIIT */
        C("64:ff9b::127.0.0.1", TRANSLATED),  /* NAT64 */
        C("64:ff9b::a9fe:a9fe", TRANSLATED),
        C("64:ff9b::8.8.8.8", TRANSLATED),   /* NAT64: a translator decides */
        C("64:ff9b:1::1", TRANSLATED),
        C("100::1", RESERVED),
        C("100:0:0:1::1", RESERVED),
        C("2001:1::1", RESERVED),
        C("2001::1", TRANSLATED),                             /* Teredo, server 0.0.0.0 */
        C("2001:0:4136:e378:8000:63bf:3fff:fdd2", TRANSLATED), /* client 192.0.2.45 */
        C("2001:0:4136:e378:8000:63bf:80ff:fffe", TRANSLATED), /* client 127.0.0.1 */
        C("2001:0:4136:e378:8000:63bf:f7f7:f7f7", TRANSLATED), /* client 8.8.8.8: a tunnel all the same */
        C("2001:2::1", BENCHMARKING),
        C("2001:db8::1", DOCUMENTATION),
        C("2002:7f00:1::1", TRANSLATED),      /* 6to4 of 127.0.0.1 */
        C("2002:a9fe:a9fe::", TRANSLATED),
        C("2002:808:808::1", TRANSLATED),     /* 6to4 of 8.8.8.8: a tunnel all the same */
        C("3fff::1", DOCUMENTATION),
        C("5f00::1", RESERVED),
        C("fc00::1", PRIVATE),
        C("fd00::1", PRIVATE),
        C("fe80::1", LINK_LOCAL),
        C("febf::1", LINK_LOCAL),
        C("fec0::1", PRIVATE),
        C("ff02::1", MULTICAST),
        C("1000::1", RESERVED),
        C("4000::1", RESERVED),
        C("c000::1", RESERVED),
        C("2606:4700::1111", PUBLIC),
        C("2a00:1450::1", PUBLIC),
        C("2001:4860:4860::8888", PUBLIC),
};

static void to_sockaddr(const char *a, struct sockaddr_storage *ss) {
        memset(ss, 0, sizeof *ss);
        if (strchr(a, ':')) {
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
                s6->sin6_family = AF_INET6;
                assert_int_equal(inet_pton(AF_INET6, a, &s6->sin6_addr), 1);
        } else {
                struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
                s4->sin_family = AF_INET;
                assert_int_equal(inet_pton(AF_INET, a, &s4->sin_addr), 1);
        }
}

static void test_addr_classes(void **state) {
        for (size_t i = 0; i < ARRAY_SIZE(addr_cases); i++) {
                struct sockaddr_storage ss;
                to_sockaddr(addr_cases[i].addr, &ss);
                enum egress_addr_class k = egress_addr_class((struct sockaddr *)&ss);
                if (k != addr_cases[i].class)
                        fail_msg("%s: %s, expected %s", addr_cases[i].addr, egress_addr_class_name(k),
                                 egress_addr_class_name(addr_cases[i].class));
        }
        struct sockaddr un = {.sa_family = AF_UNIX};
        assert_int_equal(egress_addr_class(&un), EGRESS_ADDR_RESERVED);
        assert_int_equal(egress_addr_class(NULL), EGRESS_ADDR_RESERVED);
}

static bool in_block(const uint8_t *a, const uint8_t *b, unsigned prefix) {
        for (unsigned i = 0; i < prefix; i++)
                if ((a[i / 8] ^ b[i / 8]) & (0x80 >> (i % 8)))
                        return false;
        return true;
}

/* Every row parses, names a reason, and is the deciding (longest) block of
 * at least one case above: the cases cover the whole table. */
static void test_addr_table(void **state) {
        size_t n;
        const struct egress_addr_rule *rules = egress_addr_rules(&n);
        assert_true(n >= 35);
        for (size_t i = 0; i < n; i++) {
                int family;
                uint8_t a[16];
                unsigned prefix;
                if (egress_cidr_parse(rules[i].cidr, &family, a, &prefix) < 0)
                        fail_msg("row %zu (%s) does not parse", i, rules[i].cidr);
                assert_true(rules[i].why && strlen(rules[i].why) > 5);
                assert_int_not_equal(rules[i].class, EGRESS_ADDR_PUBLIC);
                for (size_t j = 0; j < i; j++)
                        assert_string_not_equal(rules[i].cidr, rules[j].cidr);
                bool hit = false;
                for (size_t c = 0; c < ARRAY_SIZE(addr_cases) && !hit; c++) {
                        struct sockaddr_storage ss;
                        to_sockaddr(addr_cases[c].addr, &ss);
                        int cf = ss.ss_family;
                        const uint8_t *ca = cf == AF_INET
                                                    ? (const uint8_t *)&((struct sockaddr_in *)&ss)->sin_addr
                                                    : ((struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr;
                        if (cf != family || !in_block(ca, a, prefix))
                                continue;
                        /* ... and no longer row holds it. */
                        hit = true;
                        for (size_t k = 0; k < n; k++) {
                                int f2;
                                uint8_t b[16];
                                unsigned p2;
                                assert_int_equal(egress_cidr_parse(rules[k].cidr, &f2, b, &p2), 0);
                                if (f2 == family && p2 > prefix && in_block(ca, b, p2))
                                        hit = false;
                        }
                }
                if (!hit)
                        fail_msg("no case is decided by row %s", rules[i].cidr);
        }
        int f;
        uint8_t a[16];
        unsigned p;
        assert_int_equal(egress_cidr_parse("10.0.0.1/8", &f, a, &p), -EINVAL); /* bits past the prefix */
        assert_int_equal(egress_cidr_parse("10.0.0.0/33", &f, a, &p), -EINVAL);
        assert_int_equal(egress_cidr_parse("10.0.0.0", &f, a, &p), -EINVAL);
        assert_int_equal(egress_cidr_parse("::/129", &f, a, &p), -EINVAL);
}

/* ---- IP literals and names ---- */

static void test_ip_literals(void **state) {
        static const char *const yes[] = {
                "127.0.0.1", "127.1", "127.0.1", "0x7f.1", "0x7F.0.0.1", "0x7f000001", "2130706433",
                "017700000001", "0177.0.0.1", "0177.1", "127.0.0.1.", "93.184.215.14", "1.2.3.256", "999",
                "0x", "a.b.0x1f", "example.123", "::1", "::", "[::1]", "[::1]:443", "[::ffff:127.0.0.1]",
                "::ffff:127.0.0.1", "::ffff:7f00:1", "0:0:0:0:0:0:0:1", "fe80::1%eth0", "[fe80::1%25eth0]",
                "[fe80::1%eth0]:443", "127.0.0.1:443", "[127.0.0.1]", "2606:4700::1111", "64:ff9b::7f00:1",
        };
        static const char *const no[] = {
                "example.com", "api.x.com", "127.0.0.1.nip.io", "1.2.3.4.example.com", "a1", "0x7f.example",
                "xn--bcher-kva.net", "localhost", "", "[evil]", "[::1]x", "a.b.c", "0x7g",
        };
        for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
                if (!egress_is_ip_literal(yes[i]))
                        fail_msg("'%s' not seen as an IP literal", yes[i]);
        for (size_t i = 0; i < ARRAY_SIZE(no); i++)
                if (egress_is_ip_literal(no[i]))
                        fail_msg("'%s' seen as an IP literal", no[i]);
        assert_false(egress_is_ip_literal(NULL));
}

static void test_internal_names(void **state) {
        static const char *const yes[] = {
                "localhost", "LOCALHOST", "localhost.", "foo.localhost", "a.b.LocalHost", "metadata.google.internal",
                "printer.local", "router.lan", "x.home.arpa", "a.test", "x.invalid", "www.example", "intranet",
                "host", "1.0.0.127.in-addr.arpa", "foo.onion", "corp", "foo.corp", "x.localdomain", "nas.home",
                "a.private", "x.alt", "", ".",
        };
        static const char *const no[] = {
                "example.com", "api.github.com", "localhost.com", "mylocal.net", "testing.com", "test.com",
                "local.example.com", "notlocalhost.net", "internal.io", "registry.npmjs.org",
        };
        for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
                if (!egress_name_internal(yes[i]))
                        fail_msg("'%s' not seen as internal", yes[i]);
        for (size_t i = 0; i < ARRAY_SIZE(no); i++)
                if (egress_name_internal(no[i]))
                        fail_msg("'%s' seen as internal", no[i]);
}

static void test_name_normalize(void **state) {
        char out[EGRESS_HOST_MAX + 1];
        assert_int_equal(egress_name_normalize("API.Example.COM.", 16, out), 0);
        assert_string_equal(out, "api.example.com");
        assert_int_equal(egress_name_normalize("a-b.c0", 6, out), 0);
        assert_string_equal(out, "a-b.c0");
        static const char *const bad[] = {"-a.com", "a-.com", "a..com", ".a.com", "a.com..", "a_b.com",
                                          "b\xc3\xbc" "cher.de", "", ".", "a b.com", "a.com/", "a@b.com"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                memcpy(out, "untouched", 10);
                if (egress_name_normalize(bad[i], strlen(bad[i]), out) != -EINVAL)
                        fail_msg("'%s' accepted", bad[i]);
                assert_string_equal(out, "untouched");
        }
        char name[300];
        memset(name, 'a', 63);
        memcpy(name + 63, ".com", 5);
        assert_int_equal(egress_name_normalize(name, strlen(name), out), 0);
        memset(name, 'a', 64);
        memcpy(name + 64, ".com", 5);
        assert_int_equal(egress_name_normalize(name, strlen(name), out), -EINVAL);
        /* 253 bytes in labels of 49 and a dot: accepted; one more: not. */
        size_t len = 0;
        while (len + 50 <= 250) {
                memset(name + len, 'b', 49);
                name[len + 49] = '.';
                len += 50;
        }
        memcpy(name + len, "com", 3); /* 250 + 3 = 253 */
        len += 3;
        assert_int_equal(len, 253);
        assert_int_equal(egress_name_normalize(name, len, out), 0);
        name[len] = '.';
        assert_int_equal(egress_name_normalize(name, len + 1, out), 0); /* a trailing dot is free */
        name[len] = 'm';
        assert_int_equal(egress_name_normalize(name, len + 1, out), -EINVAL);
}

/* ---- Patterns and the allowlist ---- */

static void test_pattern_check(void **state) {
        static const struct {
                const char *in, *normal;
        } ok[] = {
                {"api.x.com", "api.x.com"},   {"*.x.com", "*.x.com"}, {"API.X.COM.", "api.x.com"},
                {"*.Bbc.Co.Uk", "*.bbc.co.uk"}, {"xn--bcher-kva.net", "xn--bcher-kva.net"},
                {"co.uk", "co.uk"},           {"*.example.github.io", "*.example.github.io"},
                {"registry.npmjs.org", "registry.npmjs.org"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                _cleanup_free_ char *n = NULL, *err = NULL;
                if (egress_pattern_normalize(ok[i].in, &n, &err) != 0)
                        fail_msg("'%s' refused: %s", ok[i].in, err);
                assert_string_equal(n, ok[i].normal);
                assert_int_equal(egress_pattern_check(ok[i].in, NULL), 0);
        }
        static const struct {
                const char *in, *says;
        } bad[] = {
                {"*", "alone"},
                {"*.", "alone"},
                {"*.com", "single label"},
                {"*.co.uk", "public suffix"},
                {"*.CO.UK.", "public suffix"},
                {"*.github.io", "public suffix"},
                {"*.s3.amazonaws.com", "public suffix"},
                {"*.com.au", "public suffix"},
                {"com", "single label"},
                {"x.*.com", "first label"},
                {"*x.com", "first label"},
                {"**.x.com", "first label"},
                {"*.*.x.com", "first label"},
                {"127.0.0.1", "IP address"},
                {"*.127.0.0.1", "IP address"},
                {"[::1]", "IP address"},
                {"2130706433", "IP address"},
                {"localhost", "internal"},
                {"*.localhost", "internal"},
                {"foo.internal", "internal"},
                {"printer.local", "internal"},
                {"a_b.com", "not a host name"},
                {"a.com:443", "not a host name"},
                {"", "empty"},
                {"https://a.com", "not a host name"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                _cleanup_free_ char *n = NULL, *err = NULL;
                if (egress_pattern_normalize(bad[i].in, &n, &err) != -EINVAL)
                        fail_msg("'%s' accepted", bad[i].in);
                assert_null(n);
                assert_non_null(err);
                if (!strstr(err, bad[i].says))
                        fail_msg("'%s': '%s' does not say '%s'", bad[i].in, err, bad[i].says);
                assert_int_equal(egress_pattern_check(bad[i].in, NULL), -EINVAL);
        }
}

static void test_pattern_match(void **state) {
        assert_true(egress_pattern_match("api.x.com", "api.x.com"));
        assert_false(egress_pattern_match("api.x.com", "x.com"));
        assert_false(egress_pattern_match("api.x.com", "a.api.x.com"));
        assert_false(egress_pattern_match("*.x.com", "x.com"));
        assert_true(egress_pattern_match("*.x.com", "a.x.com"));
        assert_true(egress_pattern_match("*.x.com", "a.b.x.com"));
        assert_false(egress_pattern_match("*.x.com", "evilx.com"));
        assert_false(egress_pattern_match("*.x.com", "ax.com"));
        assert_false(egress_pattern_match("*.x.com", "x.com.evil.net"));
}

static void test_allowlist(void **state) {
        struct egress_allowlist a = {0};
        assert_int_equal(egress_allowlist_grant(&a, EGRESS_SCOPE_ORGANISM, "API.x.com"), 0);
        assert_int_equal(egress_allowlist_grant(&a, EGRESS_SCOPE_ORGANISM, "api.x.com."), 0); /* already */
        assert_int_equal(egress_allowlist_grant(&a, EGRESS_SCOPE_EVOLUTION, "*.y.com"), 0);
        assert_int_equal(egress_allowlist_grant(&a, EGRESS_SCOPE_EVOLUTION, "localhost"), -EINVAL);
        assert_int_equal(egress_allowlist_grant(&a, (enum egress_scope)7, "a.com"), -EINVAL);
        char *regs[] = {"registry.npmjs.org", "*.pythonhosted.org", "Registry.NPMJS.org", NULL};
        assert_int_equal(egress_allowlist_set_registries(&a, regs), 0);
        assert_true(egress_allowlist_allows(&a, EGRESS_POLICY_LIVE, "api.x.com"));
        assert_false(egress_allowlist_allows(&a, EGRESS_POLICY_BUILD, "api.x.com"));
        assert_true(egress_allowlist_allows(&a, EGRESS_POLICY_BUILD, "a.y.com"));
        assert_false(egress_allowlist_allows(&a, EGRESS_POLICY_LIVE, "a.y.com"));
        assert_true(egress_allowlist_allows(&a, EGRESS_POLICY_BUILD, "registry.npmjs.org"));
        assert_true(egress_allowlist_allows(&a, EGRESS_POLICY_BUILD, "files.pythonhosted.org"));
        assert_false(egress_allowlist_allows(&a, EGRESS_POLICY_LIVE, "registry.npmjs.org"));
        _cleanup_strv_free_ char **live = NULL, **build = NULL;
        assert_int_equal(egress_allowlist_list(&a, EGRESS_POLICY_LIVE, &live), 0);
        assert_int_equal(strv_length(live), 1);
        assert_string_equal(live[0], "api.x.com");
        assert_int_equal(egress_allowlist_list(&a, EGRESS_POLICY_BUILD, &build), 0);
        assert_int_equal(strv_length(build), 3); /* registries first, each once */
        assert_string_equal(build[0], "registry.npmjs.org");
        assert_string_equal(build[1], "*.pythonhosted.org");
        assert_string_equal(build[2], "*.y.com");
        /* A bad list changes nothing. */
        char *bad[] = {"pypi.org", "npm.internal", NULL};
        assert_int_equal(egress_allowlist_set_registries(&a, bad), -EINVAL);
        assert_true(egress_allowlist_allows(&a, EGRESS_POLICY_BUILD, "registry.npmjs.org"));
        assert_int_equal(egress_allowlist_revoke(&a, EGRESS_SCOPE_ORGANISM, "API.X.COM"), 0);
        assert_false(egress_allowlist_allows(&a, EGRESS_POLICY_LIVE, "api.x.com"));
        assert_int_equal(egress_allowlist_revoke(&a, EGRESS_SCOPE_ORGANISM, "api.x.com"), -ENOENT);
        assert_int_equal(egress_allowlist_revoke(&a, EGRESS_SCOPE_ORGANISM, "*"), -EINVAL);
        /* Bounded. */
        for (int i = 0; i < EGRESS_PATTERNS_MAX; i++) {
                char p[64];
                snprintf(p, sizeof p, "h%d.z.com", i);
                assert_int_equal(egress_allowlist_grant(&a, EGRESS_SCOPE_ORGANISM, p), 0);
        }
        assert_int_equal(egress_allowlist_grant(&a, EGRESS_SCOPE_ORGANISM, "one-more.z.com"), -E2BIG);
        assert_int_equal(egress_allowlist_grant(&a, EGRESS_SCOPE_ORGANISM, "h3.z.com"), 0);
        egress_allowlist_done(&a);
        egress_allowlist_done(NULL);
}

/* ---- The CONNECT head ---- */

static const struct {
        const char *in;
        int r;
        const char *host;
        int port;
} request_cases[] = {
        {"CONNECT api.x.com:443 HTTP/1.1\r\nHost: api.x.com:443\r\nUser-Agent: curl/8\r\n\r\n", 0, "api.x.com", 443},
        {"CONNECT API.X.COM.:443 HTTP/1.0\r\n\r\n", 0, "api.x.com", 443},
        {"CONNECT api.x.com:443 HTTP/1.1\r\nContent-Length: 0\r\nProxy-Authorization: Basic eDp5\r\n\r\n", 0,
         "api.x.com", 443},
        {"CONNECT xn--bcher-kva.net:443 HTTP/1.1\r\n\r\n", 0, "xn--bcher-kva.net", 443},
        {"CONNECT api.x.com:80 HTTP/1.1\r\n\r\n", -EPERM, "api.x.com", 80},
        {"CONNECT api.x.com:8443 HTTP/1.1\r\n\r\n", -EPERM, "api.x.com", 8443},
        {"CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n", -EPERM, "", 443},
        {"CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", -EPERM, "", 443},
        {"CONNECT 0x7f.1:443 HTTP/1.1\r\n\r\n", -EPERM, "", 443},
        {"CONNECT [::1]:443 HTTP/1.1\r\n\r\n", -EPERM, "", 443},
        {"CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n", -EPERM, "", 443},
        {"CONNECT ::1:443 HTTP/1.1\r\n\r\n", -EPERM, "", 443},
        {"CONNECT localhost:443 HTTP/1.1\r\n\r\n", -EPERM, "localhost", 443},
        {"CONNECT metadata.google.internal:443 HTTP/1.1\r\n\r\n", -EPERM, "metadata.google.internal", 443},
        {"GET http://api.x.com/ HTTP/1.1\r\nHost: api.x.com\r\n\r\n", -EOPNOTSUPP, "", 0},
        {"connect api.x.com:443 HTTP/1.1\r\n\r\n", -EOPNOTSUPP, "", 0},
        {"CONNECT api.x.com HTTP/1.1\r\n\r\n", -EBADMSG, "", 0},
        {"CONNECT api.x.com:0443 HTTP/1.1\r\n\r\n", -EBADMSG, "", 0},
        {"CONNECT api.x.com:65536 HTTP/1.1\r\n\r\n", -EBADMSG, "", 0},
        {"CONNECT api.x.com:443/ HTTP/1.1\r\n\r\n", -EBADMSG, "", 0},
        {"CONNECT api.x.com:443 HTTP/2.0\r\n\r\n", -EBADMSG, "", 0},
        {"CONNECT  api.x.com:443 HTTP/1.1\r\n\r\n", -EBADMSG, "", 0},
        {"CONNECT api.x.com:443 HTTP/1.1 \r\n\r\n", -EBADMSG, "", 0},
        {"CONNECT api.x.com:443 HTTP/1.1\nHost: x\n\n", -EBADMSG, "", 0},
        {"CONNECT api.x.com:443 HTTP/1.1\r\n Folded: x\r\n\r\n", -EBADMSG, "api.x.com", 443},
        {"CONNECT api.x.com:443 HTTP/1.1\r\nBad Header: x\r\n\r\n", -EBADMSG, "api.x.com", 443},
        {"CONNECT api.x.com:443 HTTP/1.1\r\nNoColon\r\n\r\n", -EBADMSG, "api.x.com", 443},
        {"CONNECT api.x.com:443 HTTP/1.1\r\nX: a\x01" "b\r\n\r\n", -EBADMSG, "api.x.com", 443},
        {"CONNECT api.x.com:443 HTTP/1.1\r\nContent-Length: 5\r\n\r\n", -EBADMSG, "api.x.com", 443},
        {"CONNECT api.x.com:443 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", -EBADMSG, "api.x.com", 443},
        {"CONNECT user@api.x.com:443 HTTP/1.1\r\n\r\n", -EBADMSG, "", 443},
        {"CONNECT a_b.x.com:443 HTTP/1.1\r\n\r\n", -EBADMSG, "", 443},
        {"CONNECT :443 HTTP/1.1\r\n\r\n", -EBADMSG, "", 443},
        {"CONNECT b\xc3\xbc" "cher.net:443 HTTP/1.1\r\n\r\n", -EBADMSG, "", 443},
        {"CONNECT %31%32%37.0.0.1:443 HTTP/1.1\r\n\r\n", -EPERM, "", 443}, /* ends in a number */
        {"CONNECT api.x.com:443 HTTP/1.1\r\n", -EAGAIN, "", 0},
        {"CONNECT api.x.com:443 HTTP/1.1\r\n\r", -EAGAIN, "", 0},
        {"", -EAGAIN, "", 0},
        {"\r\n\r\n", -EBADMSG, "", 0},
};

static void test_request_cases(void **state) {
        for (size_t i = 0; i < ARRAY_SIZE(request_cases); i++) {
                struct egress_request req;
                const char *why = NULL;
                int r = egress_request_parse(request_cases[i].in, strlen(request_cases[i].in), &req, &why);
                if (r != request_cases[i].r)
                        fail_msg("case %zu: %d (%s), expected %d", i, r, why ? why : "-", request_cases[i].r);
                assert_string_equal(req.host, request_cases[i].host);
                if (r != -EAGAIN)
                        assert_int_equal(req.port, request_cases[i].port);
                if (r != 0 && r != -EAGAIN)
                        assert_non_null(why);
                if (r == 0)
                        assert_int_equal(req.head_len, strlen(request_cases[i].in));
        }
}

/* Bytes after the head are not the head's; every prefix of a good head is
 * -EAGAIN; a NUL anywhere is malformed at once. */
static void test_request_framing(void **state) {
        const char head[] = "CONNECT api.x.com:443 HTTP/1.1\r\nHost: api.x.com\r\n\r\n";
        char buf[256];
        snprintf(buf, sizeof buf, "%s\x16\x03\x01", head);
        struct egress_request req;
        const char *why;
        assert_int_equal(egress_request_parse(buf, strlen(buf), &req, &why), 0);
        assert_int_equal(req.head_len, strlen(head));
        for (size_t n = 0; n < strlen(head); n++)
                assert_int_equal(egress_request_parse(head, n, &req, &why), -EAGAIN);
        assert_int_equal(egress_request_parse("CONN\0ECT", 8, &req, &why), -EBADMSG);
        assert_int_equal(egress_request_parse("GET / HTTP/1.1\n", 15, &req, &why), -EBADMSG);
}

static void test_request_bounds(void **state) {
        static char big[EGRESS_REQUEST_MAX + 100];
        struct egress_request req;
        const char *why;
        /* No end within the bound. */
        int n = snprintf(big, sizeof big, "CONNECT api.x.com:443 HTTP/1.1\r\nX: ");
        memset(big + n, 'a', sizeof big - (size_t)n);
        assert_int_equal(egress_request_parse(big, EGRESS_REQUEST_MAX - 1, &req, &why), -EAGAIN);
        assert_int_equal(egress_request_parse(big, EGRESS_REQUEST_MAX, &req, &why), -E2BIG);
        assert_int_equal(egress_request_parse(big, sizeof big, &req, &why), -E2BIG);
        /* An end just past the bound is past it. */
        memcpy(big + EGRESS_REQUEST_MAX - 2, "\r\n\r\n", 4);
        assert_int_equal(egress_request_parse(big, EGRESS_REQUEST_MAX + 2, &req, &why), -E2BIG);
        /* Header fields: at most EGRESS_REQUEST_HEADERS_MAX. */
        for (int fields = EGRESS_REQUEST_HEADERS_MAX; fields <= EGRESS_REQUEST_HEADERS_MAX + 1; fields++) {
                size_t len = (size_t)snprintf(big, sizeof big, "CONNECT api.x.com:443 HTTP/1.1\r\n");
                for (int i = 0; i < fields; i++)
                        len += (size_t)snprintf(big + len, sizeof big - len, "X-%d: v\r\n", i);
                len += (size_t)snprintf(big + len, sizeof big - len, "\r\n");
                assert_int_equal(egress_request_parse(big, len, &req, &why),
                                 fields <= EGRESS_REQUEST_HEADERS_MAX ? 0 : -EBADMSG);
        }
}

/* ---- The ClientHello ---- */

static uint8_t hello_buf[EGRESS_HELLO_RAW_MAX * 2];

static int hello(const struct tlshello *o, char *sni, size_t *ret_len) {
        size_t len = tlshello_build(o, hello_buf, sizeof hello_buf);
        assert_true(len > 0 && len <= sizeof hello_buf);
        if (ret_len)
                *ret_len = len;
        const char *why = NULL;
        int r = egress_hello_parse(hello_buf, len, sni, &why);
        if (r != 0)
                assert_non_null(why);
        return r;
}

static void test_hello_sni(void **state) {
        char sni[EGRESS_HOST_MAX + 1];
        assert_int_equal(hello(&(struct tlshello){.sni = "api.x.com"}, sni, NULL), 0);
        assert_string_equal(sni, "api.x.com");
        assert_int_equal(hello(&(struct tlshello){.sni = "API.X.Com"}, sni, NULL), 0);
        assert_string_equal(sni, "api.x.com");
        assert_int_equal(hello(&(struct tlshello){.sni = NULL}, sni, NULL), -ENOENT);
        assert_int_equal(hello(&(struct tlshello){.sni = "127.0.0.1"}, sni, NULL), -EINVAL);
        assert_int_equal(hello(&(struct tlshello){.sni = "2130706433"}, sni, NULL), -EINVAL);
        assert_int_equal(hello(&(struct tlshello){.sni = "::1"}, sni, NULL), -EINVAL);
        assert_int_equal(hello(&(struct tlshello){.sni = "bad_name.com"}, sni, NULL), -EINVAL);
        assert_int_equal(hello(&(struct tlshello){.sni = "a.com", .sni2 = "b.com"}, sni, NULL), -EBADMSG);
        assert_int_equal(hello(&(struct tlshello){.sni = "a.com", .sni_type = 1}, sni, NULL), -EBADMSG);
        assert_int_equal(hello(&(struct tlshello){.sni = "a.com", .dup_extension = true}, sni, NULL), -EBADMSG);
}

/* Records of any size within the bounds are reassembled; every strict
 * prefix is -EAGAIN. */
static void test_hello_fragments(void **state) {
        size_t sizes[] = {1, 2, 7, 64, 100, 16384};
        for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
                char sni[EGRESS_HOST_MAX + 1];
                size_t len;
                assert_int_equal(hello(&(struct tlshello){.sni = "api.x.com", .record_max = sizes[i]}, sni, &len), 0);
                assert_string_equal(sni, "api.x.com");
                for (size_t n = 0; n < len; n++) {
                        const char *why;
                        int r = egress_hello_parse(hello_buf, n, sni, &why);
                        if (r != -EAGAIN)
                                fail_msg("record size %zu, prefix %zu: %d", sizes[i], n, r);
                }
        }
}

static void test_hello_bounds(void **state) {
        char sni[EGRESS_HOST_MAX + 1];
        /* The largest message allowed, and one byte more. */
        size_t base = tlshello_message(&(struct tlshello){.sni = "api.x.com"}, NULL, 0);
        size_t pad = EGRESS_HELLO_MAX - base - 4;
        assert_int_equal(hello(&(struct tlshello){.sni = "api.x.com", .pad = pad}, sni, NULL), 0);
        assert_int_equal(hello(&(struct tlshello){.sni = "api.x.com", .pad = pad, .record_max = 4000}, sni, NULL), 0);
        assert_int_equal(hello(&(struct tlshello){.sni = "api.x.com", .pad = pad + 1}, sni, NULL), -E2BIG);
        /* Too large is known from the first 9 bytes. */
        size_t len = tlshello_build(&(struct tlshello){.sni = "api.x.com", .pad = 20000}, hello_buf, sizeof hello_buf);
        assert_true(len > 20000);
        const char *why;
        assert_int_equal(egress_hello_parse(hello_buf, 9, sni, &why), -E2BIG);
        /* A small message in too many tiny records. */
        assert_int_equal(hello(&(struct tlshello){.sni = "api.x.com", .pad = 3000, .record_max = 1}, sni, NULL),
                         -E2BIG);
}

static void test_hello_malformed(void **state) {
        char sni[EGRESS_HOST_MAX + 1];
        const char *why;
        static const char get[] = "GET / HTTP/1.1\r\n\r\n";
        assert_int_equal(egress_hello_parse((const uint8_t *)get, strlen(get), sni, &why), -EBADMSG);
        assert_int_equal(egress_hello_parse((const uint8_t *)"G", 1, sni, &why), -EBADMSG);
        static const uint8_t sslv2[] = {0x80, 0x2e, 0x01, 0x00, 0x02};
        assert_int_equal(egress_hello_parse(sslv2, sizeof sslv2, sni, &why), -EBADMSG);
        size_t len;
        assert_int_equal(hello(&(struct tlshello){.sni = "api.x.com"}, sni, &len), 0);
        struct {
                size_t at;
                uint8_t value;
        } flips[] = {
                {0, 23},  /* application data record */
                {1, 2},   /* record version 2.x */
                {3, 0x40}, /* record length over 2^14 */
                {5, 2},   /* a ServerHello */
                {9, 2},   /* legacy_version 2.x */
                {43, 33}, /* session id longer than 32 */
        };
        for (size_t i = 0; i < ARRAY_SIZE(flips); i++) {
                uint8_t copy[1024];
                memcpy(copy, hello_buf, len);
                copy[flips[i].at] = flips[i].value;
                int r = egress_hello_parse(copy, len, sni, &why);
                if (r != -EBADMSG && r != -E2BIG)
                        fail_msg("flip %zu: %d", i, r);
        }
        /* A zero-length record. */
        uint8_t empty[] = {22, 3, 1, 0, 0, 22, 3, 1, 0, 4, 1, 0, 0, 0};
        assert_int_equal(egress_hello_parse(empty, sizeof empty, sni, &why), -EBADMSG);
        /* The extensions' length one off. */
        uint8_t copy[1024];
        memcpy(copy, hello_buf, len);
        size_t ext_len_at = 5 + 4 + 2 + 32 + 1 + 2 + 6 + 2;
        copy[ext_len_at + 1]++;
        assert_int_equal(egress_hello_parse(copy, len, sni, &why), -EBADMSG);
}

/* ---- The proxy object, without connections ---- */

static void test_proxy_object(void **state) {
        struct egress *e = NULL;
        char *bad[] = {"npm.internal", NULL};
        assert_int_equal(egress_new(&(struct egress_config){.registries = bad}, &e), -EINVAL);
        assert_null(e);
        char *regs[] = {"registry.npmjs.org", NULL};
        assert_int_equal(egress_new(&(struct egress_config){.registries = regs}, &e), 0);
        assert_int_equal(egress_grant(e, EGRESS_SCOPE_ORGANISM, "api.x.com"), 0);
        assert_int_equal(egress_grant(e, EGRESS_SCOPE_EVOLUTION, "127.0.0.1"), -EINVAL);
        assert_int_equal(egress_revoke(e, EGRESS_SCOPE_EVOLUTION, "api.x.com"), -ENOENT);
        _cleanup_strv_free_ char **live = NULL, **build = NULL;
        assert_int_equal(egress_allowed(e, EGRESS_POLICY_LIVE, &live), 0);
        assert_int_equal(strv_length(live), 1);
        assert_int_equal(egress_allowed(e, EGRESS_POLICY_BUILD, &build), 0);
        assert_int_equal(strv_length(build), 1);
        assert_string_equal(build[0], "registry.npmjs.org");
        assert_int_equal(egress_set_registries(e, NULL), 0);
        struct egress_refusal *k = NULL;
        size_t n = 99;
        assert_int_equal(egress_refusals(e, &k, &n), 0);
        assert_int_equal(n, 0);
        free(k);
        assert_int_equal(egress_set_timeouts(e, &(struct egress_timeouts){.idle_ms = -1}), -EINVAL);
        assert_int_equal(egress_set_timeouts(e, &(struct egress_timeouts){.idle_ms = 100}), 0);
        /* A door must be a listening socket, and the fd is taken either way. */
        struct egress_door *d = NULL;
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(s >= 0);
        assert_int_equal(egress_door_open(e, s, EGRESS_POLICY_LIVE, "live", &d), -EINVAL);
        assert_int_equal(fcntl(s, F_GETFD), -1);
        s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(listen(s, 4), 0);
        assert_int_equal(egress_door_open(e, s, EGRESS_POLICY_LIVE, "bad\nlabel", &d), -EINVAL);
        assert_int_equal(fcntl(s, F_GETFD), -1);
        s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(listen(s, 4), 0);
        assert_int_equal(egress_door_open(e, s, EGRESS_POLICY_LIVE, "live", &d), 0);
        egress_door_close(d);
        egress_door_close(NULL);
        s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(listen(s, 4), 0);
        assert_int_equal(egress_door_open(e, s, EGRESS_POLICY_BUILD, "evolution evo_1", &d), 0);
        egress_free(e); /* closes the door still open */
        egress_free(NULL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_addr_classes),
                cmocka_unit_test(test_addr_table),
                cmocka_unit_test(test_ip_literals),
                cmocka_unit_test(test_internal_names),
                cmocka_unit_test(test_name_normalize),
                cmocka_unit_test(test_pattern_check),
                cmocka_unit_test(test_pattern_match),
                cmocka_unit_test(test_allowlist),
                cmocka_unit_test(test_request_cases),
                cmocka_unit_test(test_request_framing),
                cmocka_unit_test(test_request_bounds),
                cmocka_unit_test(test_hello_sni),
                cmocka_unit_test(test_hello_fragments),
                cmocka_unit_test(test_hello_bounds),
                cmocka_unit_test(test_hello_malformed),
                cmocka_unit_test(test_proxy_object),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
