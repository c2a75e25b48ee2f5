/* Unit tests for the organism supervisor's configuration and state API (the
 * supervising itself runs real sandboxes: tests/integration/test-organism.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/fileio.h"
#include "organism/extensions.h"
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

/* ---- organism/control/extensions.json ---- */

static struct organism_extensions *parse(const char *json) {
        struct organism_extensions *x = NULL;
        assert_int_equal(organism_extensions_parse(json, strlen(json), &x), 0);
        assert_non_null(x);
        assert_non_null(x->errors);
        return x;
}

static bool has_error(const struct organism_extensions *x, const char *needle) {
        for (char **e = x->errors; *e; e++)
                if (strstr(*e, needle))
                        return true;
        return false;
}

static void test_extensions_good(void **state) {
        (void)state;
        struct organism_extensions *x = parse(
                "{\"screens\": [{\"id\": \"orders\", \"title\": \"Orders ✓\", \"path\": \"/admin/orders?tab=open#top\"},"
                " {\"id\": \"users-2\", \"title\": \"Users\", \"path\": \"/admin/users%20list\"}]}");
        assert_int_equal(x->n_screens, 2);
        assert_null(x->errors[0]);
        assert_string_equal(x->screens[0].id, "orders");
        assert_string_equal(x->screens[0].title, "Orders ✓");
        assert_string_equal(x->screens[0].path, "/admin/orders?tab=open#top");
        assert_string_equal(x->screens[1].path, "/admin/users%20list");
        organism_extensions_free(x);

        x = parse("{\"screens\": []}");
        assert_int_equal(x->n_screens, 0);
        assert_null(x->errors[0]);
        organism_extensions_free(x);
        organism_extensions_free(NULL);
}

/* Paths a browser would take off the app's origin, or into /_seed, or that
 * hide a control character: each refused, with a reason. */
static void test_extensions_paths(void **state) {
        (void)state;
        static const char *const bad[] = {
                "", "admin", "http://evil.com/", "https://evil.com", "javascript:alert(1)", "//evil.com/x",
                "/\\evil.com", "\\\\evil.com", "/\tevil", "/a b", "/a\nb", "/a\rb", "/\x7f", "/é",
                "/a\"b", "/a<b>", "/a`b", "/a{b}", "/a|b", "/a^b",
                "/_seed", "/_seed/", "/_seed/api/status", "/%5Fseed/", "/%5fseed", "/_seed?x=1", "/_seed#x",
                "/../x", "/a/../b", "/a/..", "/./a", "/a/.", "/%2e%2e/x", "/%2E./x", "/a/%2e",
                "/%00", "/%0a", "/%0D", "/%7f", "/%", "/%4", "/%zz", "/%1f",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                const char *why = NULL;
                if (organism_screen_path_ok(bad[i], &why))
                        fail_msg("accepted the path \"%s\"", bad[i]);
                assert_non_null(why);
        }
        assert_false(organism_screen_path_ok(NULL, NULL));
        char longp[ORGANISM_EXT_PATH_MAX + 2];
        memset(longp, 'a', sizeof longp - 1);
        longp[0] = '/';
        longp[sizeof longp - 1] = 0;
        assert_false(organism_screen_path_ok(longp, NULL));
        longp[ORGANISM_EXT_PATH_MAX] = 0; /* exactly the limit */
        assert_true(organism_screen_path_ok(longp, NULL));

        static const char *const good[] = {
                "/", "/admin", "/admin/", "/a/b-c_d.e~f", "/_seedling", "/x/_seed", "/a..b", "/.well-known/x",
                "/a?next=/_seed/", "/a?x=..", "/a#/_seed", "/a%2Fb", "/a:b@c!$&'()*+,;=", "/%41",
        };
        for (size_t i = 0; i < ARRAY_SIZE(good); i++)
                if (!organism_screen_path_ok(good[i], NULL))
                        fail_msg("refused the path \"%s\"", good[i]);
}

static void test_extensions_ids_titles(void **state) {
        (void)state;
        assert_true(organism_screen_id_ok("a"));
        assert_true(organism_screen_id_ok("orders-2"));
        assert_true(organism_screen_id_ok("0"));
        static const char *const bad_ids[] = {"", "-a", "A", "a_b", "a b", "a.b", "ä", "a/b", "a\n"};
        for (size_t i = 0; i < ARRAY_SIZE(bad_ids); i++)
                assert_false(organism_screen_id_ok(bad_ids[i]));
        assert_false(organism_screen_id_ok(NULL));
        char id[ORGANISM_EXT_ID_MAX + 2];
        memset(id, 'a', sizeof id - 1);
        id[sizeof id - 1] = 0;
        assert_false(organism_screen_id_ok(id));
        id[ORGANISM_EXT_ID_MAX] = 0;
        assert_true(organism_screen_id_ok(id));

        /* Titles: not empty, bounded, no control or text-direction characters. */
        static const char *const bad_titles[] = {
                "", "   ", "a\\nb", "a\\tb", "a\\u0007", "a\\u007f", "a\\u0085b", "\\u202eevil", "a\\u2066b",
                "a\\u200fb", "a\\u2028b",
                "12345678901234567890123456789012345678901234567890123456789012345678901234567890x",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad_titles); i++) {
                char json[512];
                snprintf(json, sizeof json, "{\"screens\": [{\"id\": \"x\", \"title\": \"%s\", \"path\": \"/x\"}]}",
                         bad_titles[i]);
                struct organism_extensions *x = parse(json);
                if (x->n_screens != 0)
                        fail_msg("accepted the title \"%s\"", bad_titles[i]);
                assert_true(has_error(x, "screens[0] (\"x\"): title"));
                organism_extensions_free(x);
        }
}

/* A bad entry costs only itself; each refusal names the entry. */
static void test_extensions_keeps_the_rest(void **state) {
        (void)state;
        struct organism_extensions *x = parse(
                "{\"screens\": ["
                "{\"id\": \"a\", \"title\": \"A\", \"path\": \"/a\"},"
                "{\"id\": \"b\", \"title\": \"B\", \"path\": \"//evil.com\"},"
                "{\"id\": \"a\", \"title\": \"again\", \"path\": \"/a2\"},"
                "7,"
                "{\"id\": \"c\", \"title\": \"C\", \"path\": \"/c\", \"onload\": \"x\"},"
                "{\"id\": \"Bad!\", \"title\": \"D\", \"path\": \"/d\"},"
                "{\"id\": \"e\", \"title\": 5, \"path\": \"/e\"},"
                "{\"id\": \"f\", \"title\": \"F\"},"
                "{\"id\": \"g\", \"title\": \"G\", \"path\": \"/_seed/api/status\"},"
                "{\"id\": \"h\", \"title\": \"H\", \"path\": \"/h\"}"
                "], \"extra\": 1}");
        assert_int_equal(x->n_screens, 2);
        assert_string_equal(x->screens[0].id, "a");
        assert_string_equal(x->screens[1].id, "h");
        assert_true(has_error(x, "screens[1] (\"b\"): path starts with '//'"));
        assert_true(has_error(x, "screens[2] (\"a\"): another screen has this id"));
        assert_true(has_error(x, "screens[3] is not an object"));
        assert_true(has_error(x, "screens[4] has a key other than"));
        assert_true(has_error(x, "screens[5].id must be"));
        assert_true(has_error(x, "screens[6] (\"e\"): title must be a string"));
        assert_true(has_error(x, "screens[7] (\"f\"): path must be a string"));
        assert_true(has_error(x, "screens[8] (\"g\"): path is the control plane's"));
        assert_true(has_error(x, "keys other than \"screens\""));
        /* The file's own text is never echoed beyond a valid id. */
        assert_false(has_error(x, "evil.com"));
        assert_false(has_error(x, "onload"));
        organism_extensions_free(x);
}

static void test_extensions_bounds(void **state) {
        (void)state;
        /* Malformed: one error naming line and column, no screens. */
        static const char *const broken[] = {
                "", "nul", "[", "{\"screens\": [}", "[{\"id\": \"a\"}]", "\"x\"", "{\"screens\": {}}",
                "{\"screens\": [{\"id\": \"a\", \"id\": \"b\", \"title\": \"T\", \"path\": \"/\"}]}",
                "{\"screens\": [{\"id\": \"a\\u0000\", \"title\": \"T\", \"path\": \"/\"}]}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(broken); i++) {
                struct organism_extensions *x = parse(broken[i]);
                assert_int_equal(x->n_screens, 0);
                assert_non_null(x->errors[0]);
                assert_true(strlen(x->errors[0]) < ORGANISM_EXT_ERROR_MAX);
                organism_extensions_free(x);
        }
        /* jansson's message quotes the input: only printable ASCII of it. */
        struct organism_extensions *x = parse("{\"screens\": \x01\xff\n}");
        assert_true(has_error(x, ORGANISM_EXT_FILE ":1:"));
        for (const char *p = x->errors[0]; *p; p++)
                assert_true((unsigned char)*p >= 0x20 || *p == 0);
        organism_extensions_free(x);

        /* Too large: refused before parsing. */
        size_t big = ORGANISM_EXT_FILE_MAX + 1;
        _cleanup_free_ char *huge = malloc(big);
        assert_non_null(huge);
        memset(huge, ' ', big);
        assert_int_equal(organism_extensions_parse(huge, big, &x), 0);
        assert_int_equal(x->n_screens, 0);
        assert_true(has_error(x, "larger than 64 KiB"));
        organism_extensions_free(x);

        /* More screens than allowed: the first ORGANISM_EXT_SCREENS_MAX, and
         * the errors themselves are bounded. */
        _cleanup_buf_ struct buf b = BUF_INIT(ORGANISM_EXT_FILE_MAX);
        assert_int_equal(buf_puts(&b, "{\"screens\": ["), 0);
        for (int i = 0; i < 200; i++)
                assert_int_equal(buf_printf(&b, "%s{\"id\": \"s%d\", \"title\": \"S\", \"path\": \"%s\"}", i ? "," : "", i,
                                            i % 2 ? "/ok" : "/../no"),
                                 0);
        assert_int_equal(buf_puts(&b, "]}"), 0);
        assert_int_equal(organism_extensions_parse(b.data, b.len, &x), 0);
        assert_int_equal(x->n_screens, ORGANISM_EXT_SCREENS_MAX / 2);
        assert_int_equal(strv_length(x->errors), ORGANISM_EXT_ERRORS_MAX + 1);
        assert_true(has_error(x, "and 1 more problem"));
        organism_extensions_free(x);
}

/* Read beneath the Seed's folder through fsx: missing is fine, a symlink
 * or a directory is an error and never followed. */
static void test_extensions_read(void **state) {
        (void)state;
        char tmpl[] = "/tmp/test-organism-ext.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        int root = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(root >= 0);
        struct organism_extensions *x = NULL;
        assert_int_equal(organism_extensions_read(root, &x), 0);
        assert_int_equal(x->n_screens, 0);
        assert_null(x->errors[0]);
        organism_extensions_free(x);
        char *none = (char *)"unset";
        assert_int_equal(organism_extensions_status(tmpl, &none), 0);
        assert_null(none);

        _cleanup_free_ char *dir = join(tmpl, "organism/control");
        _cleanup_free_ char *file = join(tmpl, ORGANISM_EXT_FILE);
        assert_int_equal(mkdir_p(dir, 0755), 0);
        const char *json = "{\"screens\": [{\"id\": \"a\", \"title\": \"A\", \"path\": \"/a\"}]}";
        assert_int_equal(write_file_atomic(file, json, strlen(json), 0644), 0);
        assert_int_equal(organism_extensions_read(root, &x), 0);
        assert_int_equal(x->n_screens, 1);
        organism_extensions_free(x);

        _cleanup_free_ char *line = NULL;
        assert_int_equal(organism_extensions_status(tmpl, &line), 0);
        assert_string_equal(line, "1 shown");
        free(TAKE_PTR(line));

        unlink(file);
        assert_int_equal(symlink("/etc/passwd", file), 0);
        assert_int_equal(organism_extensions_read(root, &x), 0);
        assert_int_equal(x->n_screens, 0);
        assert_true(has_error(x, "symbolic link"));
        organism_extensions_free(x);
        assert_int_equal(organism_extensions_status(tmpl, &line), 0);
        assert_true(startswith(line, "0 shown; 1 problem in " ORGANISM_EXT_FILE ": "));
        assert_non_null(strstr(line, "symbolic link"));
        free(TAKE_PTR(line));

        unlink(file);
        assert_int_equal(mkdir(file, 0755), 0);
        assert_int_equal(organism_extensions_read(root, &x), 0);
        assert_true(has_error(x, "a directory"));
        organism_extensions_free(x);
        close(root);
        rm_rf(tmpl);
}

/* The status' cache of extensions.json: every change on the way to the
 * file or of the file is seen on the next call (a new file, a rewrite in
 * place or through another link, a chmod, a symlink, a folder replaced, a
 * removal), and the line is kept while nothing changed. */
static char *ext_status(struct organism_ext_cache *c, struct fswatch *w) {
        char *line = NULL;
        assert_int_equal(organism_ext_cache_status(c, fswatch_changes(w), &line), 0);
        return line;
}

/* Marks the kept line, so the next call shows whether it was served. */
static void ext_poke(struct organism_ext_cache *c) {
        assert_true(c->seen != 0);
        free(c->line);
        c->line = strdup("kept");
}

static void test_extensions_cache(void **state) {
        (void)state;
        char tmpl[] = "/tmp/test-organism-extc.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        _cleanup_free_ char *dir = join(tmpl, "organism/control");
        _cleanup_free_ char *file = join(tmpl, ORGANISM_EXT_FILE);
        struct fswatch w;
        struct organism_ext_cache c;
        assert_int_equal(fswatch_init(&w), 0);
        assert_true(w.fd >= 0);
        assert_int_equal(organism_ext_cache_init(&c, tmpl, &w), 0);
        assert_null(ext_status(&c, &w));
        assert_int_equal(mkdir_p(dir, 0755), 0);
        assert_null(ext_status(&c, &w));

        /* Written: read, then kept while nothing changes. */
        const char *one = "{\"screens\": [{\"id\": \"a\", \"title\": \"A\", \"path\": \"/a\"}]}";
        assert_int_equal(write_file_atomic(file, one, strlen(one), 0644), 0);
        char *line = ext_status(&c, &w);
        assert_string_equal(line, "1 shown");
        free(line);
        ext_poke(&c);
        for (int i = 0; i < 3; i++) {
                line = ext_status(&c, &w);
                assert_string_equal(line, "kept");
                free(line);
        }

        /* Replaced (another inode). */
        const char *two = "{\"screens\": [{\"id\": \"a\", \"title\": \"A\", \"path\": \"/a\"}, "
                          "{\"id\": \"b\", \"title\": \"B\", \"path\": \"/b\"}]}";
        assert_int_equal(write_file_atomic(file, two, strlen(two), 0644), 0);
        line = ext_status(&c, &w);
        assert_string_equal(line, "2 shown");
        free(line);

        /* Written in place (the same inode). */
        ext_poke(&c);
        int fd = open(file, O_WRONLY | O_TRUNC | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "{", 1), 1);
        close(fd);
        line = ext_status(&c, &w);
        assert_true(startswith(line, "0 shown; 1 problem in " ORGANISM_EXT_FILE));
        free(line);

        /* chmod, and a second link (refused by the read); then written
         * through that other name, outside the folders watched. */
        assert_int_equal(write_file_atomic(file, one, strlen(one), 0644), 0);
        free(ext_status(&c, &w));
        ext_poke(&c);
        assert_int_equal(chmod(file, 0600), 0);
        line = ext_status(&c, &w);
        assert_string_equal(line, "1 shown");
        free(line);
        ext_poke(&c);
        _cleanup_free_ char *other = join(tmpl, "other.json");
        assert_int_equal(link(file, other), 0);
        line = ext_status(&c, &w);
        assert_non_null(strstr(line, "hard links"));
        free(line);
        _cleanup_free_ char *elsewhere = join(tmpl, "elsewhere");
        _cleanup_free_ char *far = join(tmpl, "elsewhere/far.json");
        assert_int_equal(mkdir(elsewhere, 0755), 0);
        assert_int_equal(rename(other, far), 0);
        free(ext_status(&c, &w));
        ext_poke(&c);
        fd = open(far, O_WRONLY | O_TRUNC | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, two, strlen(two)), (ssize_t)strlen(two));
        close(fd);
        line = ext_status(&c, &w);
        assert_non_null(strstr(line, "hard links")); /* read again: not "kept" */
        free(line);
        unlink(far);
        line = ext_status(&c, &w);
        assert_string_equal(line, "2 shown");
        free(line);

        /* The folder on the way replaced, by one without the file, and back. */
        ext_poke(&c);
        _cleanup_free_ char *organism = join(tmpl, "organism");
        _cleanup_free_ char *aside = join(tmpl, "aside");
        _cleanup_free_ char *empty = join(tmpl, "empty");
        assert_int_equal(mkdir(empty, 0755), 0);
        assert_int_equal(rename(organism, aside), 0);
        assert_int_equal(rename(empty, organism), 0);
        assert_null(ext_status(&c, &w));
        assert_int_equal(rmdir(organism), 0);
        assert_int_equal(rename(aside, organism), 0);
        line = ext_status(&c, &w);
        assert_string_equal(line, "2 shown");
        free(line);

        /* A symlink in its place, then nothing. */
        unlink(file);
        assert_int_equal(symlink("/etc/passwd", file), 0);
        line = ext_status(&c, &w);
        assert_non_null(strstr(line, "symbolic link"));
        free(line);
        unlink(file);
        assert_null(ext_status(&c, &w));
        organism_ext_cache_done(&c);
        organism_ext_cache_done(&c); /* twice, and a zeroed one: nothing */
        struct organism_ext_cache zero = {0};
        organism_ext_cache_done(&zero);

        /* Without inotify: every call reads, nothing is kept. */
        close(w.fd);
        w.fd = -1;
        assert_int_equal(organism_ext_cache_init(&c, tmpl, &w), 0);
        assert_int_equal(write_file_atomic(file, one, strlen(one), 0644), 0);
        line = ext_status(&c, &w);
        assert_string_equal(line, "1 shown");
        free(line);
        assert_int_equal(c.seen, 0);
        organism_ext_cache_done(&c);
        fswatch_done(&w);
        rm_rf(tmpl);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_invalid),
                cmocka_unit_test(test_state_names),
                cmocka_unit_test(test_connect_checks),
                cmocka_unit_test(test_probe),
                cmocka_unit_test(test_extensions_good),
                cmocka_unit_test(test_extensions_paths),
                cmocka_unit_test(test_extensions_ids_titles),
                cmocka_unit_test(test_extensions_keeps_the_rest),
                cmocka_unit_test(test_extensions_bounds),
                cmocka_unit_test(test_extensions_read),
                cmocka_unit_test(test_extensions_cache),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
