/* model-server.h — the scripted model server (tests/fakes/model_server.py)
 * for the C integration tests of kernel/model and kernel/mind: started once
 * per test binary in a temporary folder (cmocka group setup/teardown:
 * start_server, stop_server), driven with its control endpoints (load_script,
 * requests, request_count). Header-only (static), for test binaries; include
 * after cmocka.h. SERVER is the server's path. */
#pragma once

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <time.h>

#include "base/fileio.h"
#include "base/proc.h"
#include "httpc/httpc.h"

#define SERVER SEED_SOURCE_ROOT "/tests/fakes/model_server.py"

static char tmp[64] = "/tmp/seed-model-XXXXXX";
static char base[128];   /* http://127.0.0.1:<port> */
static pid_t server_pid;

static char *find_python(void) {
        if (access("/usr/bin/python3", X_OK) == 0)
                return strdup("/usr/bin/python3");
        const char *path = getenv("PATH");
        _cleanup_free_ char *copy = strdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
        for (char *save = NULL, *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                char *p = path_join(d, "python3");
                if (p && access(p, X_OK) == 0)
                        return p;
                free(p);
        }
        return NULL;
}

static void sleep_ms(int ms) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

static void print_server_log(void) {
        _cleanup_free_ char *log_path = path_join(tmp, "server.log"), *log = NULL;
        if (read_file(log_path, 1 << 20, &log, NULL) >= 0)
                print_error("model_server output:\n%s\n", log);
}

static int start_server(void **state) {
        assert_non_null(mkdtemp(tmp));
        _cleanup_free_ char *python = find_python(), *port_file = path_join(tmp, "port"),
                            *log_path = path_join(tmp, "server.log");
        assert_non_null(python);
        _cleanup_close_ int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(log_fd >= 0);
        char *const argv[] = {python, SERVER, "--port-file", port_file, NULL};
        _cleanup_strv_free_ char **envp = NULL;
        assert_int_equal(strv_pushf(&envp, "PATH=%s", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin"), 0);
        assert_int_equal(strv_pushf(&envp, "HOME=%s", getenv("HOME") ? getenv("HOME") : "/"), 0);
        assert_int_equal(strv_push(&envp, "PYTHONDONTWRITEBYTECODE=1"), 0);
        assert_int_equal(proc_spawn(&(struct proc_opts){.argv = argv, .envp = envp, .stdin_fd = -1, .out_fd = log_fd},
                                    &server_pid),
                         0);
        int64_t deadline = now_ms() + 15000;
        for (;;) {
                _cleanup_free_ char *text = NULL;
                if (read_file(port_file, 64, &text, NULL) >= 0 && atoi(text) > 0) {
                        snprintf(base, sizeof base, "http://127.0.0.1:%d", atoi(text));
                        break;
                }
                if (now_ms() > deadline || proc_wait(server_pid, 0) >= 0) {
                        print_server_log();
                        fail_msg("the model server did not start");
                }
                sleep_ms(20);
        }
        return 0;
}

static int stop_server(void **state) {
        if (server_pid > 0) {
                proc_kill_group(server_pid, SIGTERM);
                if (proc_wait(server_pid, 5000) < 0) {
                        proc_kill_group(server_pid, SIGKILL);
                        proc_wait(server_pid, 5000);
                }
        }
        rm_rf(tmp);
        return 0;
}

/* A control request to the server; returns the parsed JSON body. */
static json_t *control(const char *method, const char *path, const char *body) {
        char url[256];
        snprintf(url, sizeof url, "%s%s", base, path);
        char *headers[] = {"Content-Type: application/json", NULL};
        struct httpc_response res = {0};
        _cleanup_free_ char *err = NULL;
        int r = httpc_do(&(struct httpc_request){.method = method, .url = url, .headers = headers, .body = body,
                                                 .body_len = body ? strlen(body) : 0, .timeout_ms = 10000},
                         &res, &err);
        if (r < 0)
                print_error("%s %s: %s\n", method, path, err ? err : "?");
        assert_int_equal(r, 0);
        if (res.status != 200)
                print_error("%s %s: HTTP %ld: %s\n", method, path, res.status, res.body);
        assert_int_equal(res.status, 200);
        json_t *j = json_loads(res.body, 0, NULL);
        httpc_response_done(&res);
        assert_non_null(j);
        return j;
}

static void load_script(const char *script) {
        json_decref(control("POST", "/_script", script));
}

/* GET /_requests; caller json_decref()s. */
static json_t *requests(void) {
        json_t *j = control("GET", "/_requests", NULL);
        assert_true(json_is_array(j));
        return j;
}

static size_t request_count(void) {
        json_t *j = requests();
        size_t n = json_array_size(j);
        json_decref(j);
        return n;
}
