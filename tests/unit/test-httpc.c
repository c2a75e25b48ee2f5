/* Unit tests for kernel/httpc over a Unix socket: a thread of the test plays
 * the server with a canned answer (no network), as the http_request tool
 * talks to a preview app's bridge socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "httpc/httpc.h"
#include "base/text.h"
#include "canned-server.h"

static char sock_path[108];

static int listen_at(const char *path) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        (void)unlink(path);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        assert_int_equal(listen(fd, 4), 0);
        return fd;
}

/* Runs one request against a server answering `answer`. */
static int exchange(struct canned_server *s, struct httpc_request *req, struct httpc_response *res) {
        s->listen_fd = listen_at(sock_path);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, canned_serve, s), 0);
        req->unix_socket = sock_path;
        if (!req->url)
                req->url = "http://localhost/x";
        if (!req->timeout_ms)
                req->timeout_ms = 5000;
        int r = httpc_do(req, res, NULL);
        shutdown(s->listen_fd, SHUT_RDWR); /* frees accept() if httpc never connected */
        pthread_join(t, NULL);
        close(s->listen_fd);
        return r;
}

static void test_status_line_headers_body(void **state) {
        struct canned_server s = {.answer = "HTTP/1.1 201 Created\r\nX-A: 1\r\nContent-Length: 5\r\n\r\nhello"};
        struct httpc_response res = {0};
        assert_int_equal(exchange(&s, &(struct httpc_request){.method = "POST", .body = "{}", .body_len = 2}, &res), 0);
        assert_int_equal(res.status, 201);
        assert_string_equal(res.status_line, "HTTP/1.1 201 Created");
        assert_string_equal(httpc_response_header(&res, "x-a"), "1");
        assert_string_equal(res.body, "hello");
        assert_false(res.truncated);
        assert_non_null(strstr(s.request, "POST /x HTTP/1.1\r\n"));
        assert_non_null(strstr(s.request, "Host: localhost\r\n"));
        httpc_response_done(&res);
}

static void test_chunked(void **state) {
        struct canned_server s = {.answer = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                     "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"};
        struct httpc_response res = {0};
        assert_int_equal(exchange(&s, &(struct httpc_request){.method = "GET"}, &res), 0);
        assert_string_equal(res.body, "abcde");
        httpc_response_done(&res);
}

/* A redirect is an answer like any other: never followed. */
static void test_no_redirect(void **state) {
        struct canned_server s = {.answer = "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\n\r\n"};
        struct httpc_response res = {0};
        assert_int_equal(exchange(&s, &(struct httpc_request){.method = "GET"}, &res), 0);
        assert_int_equal(res.status, 302);
        httpc_response_done(&res);
}

/* Over the cap: -E2BIG, or with .truncate the head of the body. */
static void test_truncate_at_cap(void **state) {
        struct canned_server s = {.answer = "HTTP/1.1 200 OK\r\n\r\n", .repeat = 256};
        struct httpc_response res = {0};
        assert_int_equal(exchange(&s, &(struct httpc_request){.method = "GET", .max_response = 1000}, &res), -E2BIG);
        struct canned_server t = {.answer = "HTTP/1.1 200 OK\r\n\r\n", .repeat = 256};
        assert_int_equal(exchange(&t, &(struct httpc_request){.method = "GET", .max_response = 1000, .truncate = true},
                                  &res),
                         0);
        assert_true(res.truncated);
        assert_int_equal(res.body_len, 1000);
        assert_int_equal(res.body[0], 'x');
        assert_int_equal(res.body[1000], 0);
        httpc_response_done(&res);
}

/* CR or LF in a header line (a model's "a\r\nHost: …") is never sent. */
static void test_header_injection_refused(void **state) {
        char *bad[] = {"X-A: a\r\nHost: 127.0.0.1:9", NULL};
        char *bad_lf[] = {"X-A: a\nb", NULL};
        struct httpc_response res = {0};
        assert_int_equal(httpc_do(&(struct httpc_request){.method = "GET", .url = "http://localhost/", .headers = bad},
                                  &res, NULL),
                         -EINVAL);
        assert_int_equal(httpc_do(&(struct httpc_request){.method = "GET", .url = "http://localhost/", .headers = bad_lf},
                                  &res, NULL),
                         -EINVAL);
        assert_int_equal(httpc_do(&(struct httpc_request){.method = "GET /a HTTP/1.1\r\n", .url = "http://localhost/"},
                                  &res, NULL),
                         -EINVAL);
}

static void test_not_http(void **state) {
        struct canned_server s = {.answer = "hello, this is not HTTP\n"};
        struct httpc_response res = {0};
        int r = exchange(&s, &(struct httpc_request){.method = "GET"}, &res);
        assert_true(r < 0);
}

static int refuse(void *userdata, int fd) { return -EPERM; }
static int accept_fd(void *userdata, int fd) {
        *(int *)userdata = fd;
        return 0;
}

/* check_fn sees the connected socket before anything is sent; its error is
 * httpc_do()'s. */
static void test_check_fn(void **state) {
        struct httpc_response res = {0};
        struct canned_server s = {.answer = "HTTP/1.1 200 OK\r\n\r\n"};
        assert_int_equal(exchange(&s, &(struct httpc_request){.method = "GET", .check_fn = refuse}, &res), -EPERM);
        assert_string_equal(s.request, "");
        int seen = -1;
        struct canned_server t = {.answer = "HTTP/1.1 204 No Content\r\n\r\n"};
        assert_int_equal(exchange(&t, &(struct httpc_request){.method = "GET", .check_fn = accept_fd,
                                                              .check_userdata = &seen},
                                  &res),
                         0);
        assert_true(seen >= 0);
        assert_int_equal(res.status, 204);
        httpc_response_done(&res);
}

static void test_http_text(void **state) {
        assert_true(http_token_ok("GET"));
        assert_true(http_token_ok("X-Custom_1.a~"));
        assert_false(http_token_ok(""));
        assert_false(http_token_ok(NULL));
        assert_false(http_token_ok("GET /"));
        assert_false(http_token_ok("X-A:"));
        assert_false(http_token_ok("a\r\nb"));
        assert_true(http_field_value_ok("a\tb c"));
        assert_false(http_field_value_ok("a\r\nHost: x"));
        assert_false(http_field_value_ok("a\x7f"));
}

int main(void) {
        snprintf(sock_path, sizeof sock_path, "/tmp/seed-test-httpc-%d.sock", (int)getpid());
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_status_line_headers_body),
                cmocka_unit_test(test_chunked),
                cmocka_unit_test(test_no_redirect),
                cmocka_unit_test(test_truncate_at_cap),
                cmocka_unit_test(test_header_injection_refused),
                cmocka_unit_test(test_not_http),
                cmocka_unit_test(test_check_fn),
                cmocka_unit_test(test_http_text),
        };
        int r = cmocka_run_group_tests(tests, NULL, NULL);
        (void)unlink(sock_path);
        return r;
}
