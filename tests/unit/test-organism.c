/* Unit tests for the organism supervisor's configuration and state API (the
 * supervising itself runs real sandboxes: tests/integration/test-organism.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "organism/organism.h"
#include "canned-server.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

static struct organism_config good(void) {
        return (struct organism_config){
                .seed_dir = "/srv/seeds/tasks",
                .build_cmd = "make -C organism build",
                .run_cmd = "organism/bin/server",
                .health_path = "/healthz",
                .port = 8080,
                .bridge_path = "/usr/libexec/seed/seed-bridge",
        };
}

static void test_defaults(void **state) {
        (void)state;
        struct organism_config cfg = good();
        struct organism *o = NULL;
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_int_equal(organism_state(o), ORGANISM_STOPPED);
        assert_string_equal(organism_socket(o), "/srv/seeds/tasks/.seed/organism/http.sock");
        assert_int_equal(organism_crash_count(o), 0);
        assert_int_equal(organism_wait_ready(o, 10), -ESRCH);
        char *reason = NULL;
        assert_int_equal(organism_reason(o, &reason), 0);
        assert_string_equal(reason, "stopped");
        free(reason);
        organism_stop(o); /* never started: a no-op */
        organism_free(o);
        organism_free(NULL);

        cfg.run_dir = "/run/x";
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_string_equal(organism_socket(o), "/run/x/http.sock");
        /* Another folder to build and run from, while stopped; the socket stays. */
        assert_int_equal(organism_set_workspace(o, "/srv/seeds/tasks/.seed/live"), 0);
        assert_int_equal(organism_set_workspace(o, "relative/live"), -EINVAL);
        assert_int_equal(organism_set_workspace(o, NULL), 0);
        assert_string_equal(organism_socket(o), "/run/x/http.sock");
        organism_free(o);
        cfg.workspace = "/srv/seeds/tasks/.seed/live";
        assert_int_equal(organism_new(&cfg, &o), 0);
        organism_free(o);
}

static void test_invalid(void **state) {
        (void)state;
        struct organism *o = NULL;
        struct organism_config cfg = good();
        cfg.seed_dir = NULL;
        assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        cfg = good();
        cfg.run_cmd = "";
        assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        cfg = good();
        cfg.port = 70000;
        assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        const char *bad_health[] = {"healthz", "/a b", "/a\r\nX: y", ""};
        for (size_t i = 0; i < sizeof bad_health / sizeof bad_health[0]; i++) {
                cfg = good();
                cfg.health_path = bad_health[i];
                assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        }
        cfg = good();
        cfg.workspace = "live";
        assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        cfg = good();
        cfg.bridge_path = "seed-bridge";
        assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        assert_null(o);
}

static void test_state_names(void **state) {
        (void)state;
        assert_string_equal(organism_state_name(ORGANISM_STOPPED), "stopped");
        assert_string_equal(organism_state_name(ORGANISM_BUILDING), "building");
        assert_string_equal(organism_state_name(ORGANISM_STARTING), "starting");
        assert_string_equal(organism_state_name(ORGANISM_RUNNING), "running");
        assert_string_equal(organism_state_name(ORGANISM_CRASHED), "crashed");
        assert_string_equal(organism_state_name(ORGANISM_DOWN), "down");
        assert_string_equal(organism_state_name((enum organism_state)99), "unknown");
}

/* Binds and listens on dir/name through an O_PATH fd (any path length). */
static int listen_at(const char *dir, const char *name) {
        int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dfd, name);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        assert_int_equal(listen(fd, 8), 0);
        close(dfd);
        return fd;
}

static char *join(const char *a, const char *b) {
        char *p = path_join(a, b);
        assert_non_null(p);
        return p;
}

/* organism_connect() reaches only a socket this process listens on, in a
 * directory of ours, never through a symlink. */
static void test_connect_checks(void **state) {
        (void)state;
        char tmpl[] = "/tmp/test-organism.XXXXXX";
        assert_non_null(mkdtemp(tmpl)); /* 0700 */
        _cleanup_free_ char *good = join(tmpl, "http.sock");
        int lfd = listen_at(tmpl, "http.sock");
        int fd = -1;
        assert_int_equal(organism_connect(good, 0, &fd), 0);
        assert_true(fd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);

        /* A long Seed path (beyond sun_path) still works. */
        _cleanup_free_ char *deep = strdup(tmpl);
        while (strlen(deep) < 150) {
                char *next = join(deep, "a-rather-long-directory-name");
                free(deep);
                deep = next;
        }
        assert_int_equal(mkdir_p(deep, 0700), 0);
        _cleanup_free_ char *deep_sock = join(deep, "http.sock");
        int deep_lfd = listen_at(deep, "http.sock");
        fd = -1;
        assert_int_equal(organism_connect(deep_sock, 0, &fd), 0);
        close(fd);
        close(deep_lfd);

        /* A symlink in place of the socket, even to ours: refused. */
        _cleanup_free_ char *link = join(tmpl, "link.sock");
        assert_int_equal(symlink(good, link), 0);
        assert_int_equal(organism_connect(link, 0, &fd), -ELOOP);
        _cleanup_free_ char *file = join(tmpl, "file.sock");
        assert_int_equal(write_file_atomic(file, "", 0, 0600), 0);
        assert_int_equal(organism_connect(file, 0, &fd), -ENOTSOCK);
        _cleanup_free_ char *missing = join(tmpl, "missing.sock");
        assert_int_equal(organism_connect(missing, 0, &fd), -ENOENT);

        /* The directory: a symlink to it, or one others may enter: refused. */
        _cleanup_free_ char *dir_link = join(tmpl, "dirlink"), *via_link = join(dir_link, "http.sock");
        assert_int_equal(symlink(tmpl, dir_link), 0);
        assert_true(organism_connect(via_link, 0, &fd) < 0);
        assert_int_equal(chmod(tmpl, 0755), 0);
        assert_int_equal(organism_connect(good, 0, &fd), -EPERM);
        assert_int_equal(chmod(tmpl, 0700), 0);

        /* Another process listening there (as a sandbox once could): refused. */
        _cleanup_free_ char *theirs = join(tmpl, "theirs.sock");
        int ready[2];
        assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(ready[0]);
                int cfd = listen_at(tmpl, "theirs.sock");
                (void)!write(ready[1], "x", 1);
                pause();
                close(cfd);
                _exit(0);
        }
        close(ready[1]);
        char c;
        assert_int_equal(read(ready[0], &c, 1), 1);
        close(ready[0]);
        fd = -1;
        assert_int_equal(organism_connect(theirs, 0, &fd), -EPERM);
        assert_int_equal(fd, -1);
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, NULL, 0), pid);

        assert_int_equal(organism_connect("relative.sock", 0, &fd), -EINVAL);
        assert_int_equal(organism_connect(NULL, 0, &fd), -EINVAL);
        close(lfd);
        rm_rf(tmpl);
}

/* One probe of sock against a server answering reply; what was asked in
 * *ret_request (may be NULL). */
static int probe_with(int lfd, const char *sock, const char *reply, char *ret_request, size_t size) {
        struct canned_server a = {.listen_fd = lfd, .answer = reply};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, canned_serve, &a), 0);
        int r = organism_probe(sock, "/healthz");
        assert_int_equal(pthread_join(t, NULL), 0);
        if (ret_request)
                snprintf(ret_request, size, "%s", a.request);
        return r;
}

/* organism_probe(): a GET through kernel/httpc over a checked socket; 0 only
 * for a 2xx answer. */
static void test_probe(void **state) {
        (void)state;
        char tmpl[] = "/tmp/test-organism.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        _cleanup_free_ char *sock = join(tmpl, "http.sock"), *missing = join(tmpl, "missing.sock");
        int lfd = listen_at(tmpl, "http.sock");
        char req[CANNED_REQUEST_MAX];
        assert_int_equal(probe_with(lfd, sock, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", req, sizeof req),
                         0);
        assert_true(startswith(req, "GET /healthz HTTP/1.1\r\n"));
        assert_non_null(strstr(req, "\r\nHost: localhost\r\n"));
        assert_non_null(strstr(req, "\r\nUser-Agent: seed-kernel\r\n"));
        assert_int_equal(probe_with(lfd, sock, "HTTP/1.1 204 No Content\r\n\r\n", NULL, 0), 0);
        assert_int_equal(probe_with(lfd, sock, "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n", NULL, 0), -EIO);
        assert_int_equal(probe_with(lfd, sock, "not http at all\r\n\r\n", NULL, 0), -EIO);
        assert_int_equal(organism_probe(missing, "/healthz"), -ENOENT);
        assert_int_equal(organism_probe(sock, "healthz"), -EINVAL);
        close(lfd);
        rm_rf(tmpl);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_invalid),
                cmocka_unit_test(test_state_names),
                cmocka_unit_test(test_connect_checks),
                cmocka_unit_test(test_probe),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
