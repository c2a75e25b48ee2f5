/* Integration tests for the sandbox: real bwrap, as the unprivileged account.
 * Each test runs a command inside a sandbox and checks what it can see.
 *
 * The same file, compiled with -DSANDBOX_PROBE, is a small probe the tests
 * build at run time and run inside sandboxes: it makes system calls and
 * connections and prints what happened. */
#ifdef SANDBOX_PROBE
/* "probe sys NAME...": one line "NAME ERRNO" per call (0: it worked), with
 * harmless arguments. "probe tcp IP PORT", "probe abstract NAME": whether a
 * connection opens. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/un.h>
#include <stddef.h>
#include <unistd.h>

static long forked(long r) {
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, __WALL);
        return r;
}

static long probe(const char *n) {
        char a = 'a', b = 0;
        static int devnull = -1;
        if (devnull < 0)
                devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (!strcmp(n, "ptrace")) {
                long data;
                return syscall(SYS_ptrace, 2 /* PEEKDATA */, getpid(), NULL, &data);
        }
        if (!strcmp(n, "process_vm_readv") || !strcmp(n, "process_vm_writev")) {
                struct iovec l = {&b, 1}, r = {&a, 1};
                return syscall(!strcmp(n, "process_vm_readv") ? SYS_process_vm_readv : SYS_process_vm_writev,
                               getpid(), &l, 1, &r, 1, 0);
        }
        if (!strcmp(n, "io_uring_setup")) return syscall(SYS_io_uring_setup, 1, NULL);
        if (!strcmp(n, "io_uring_enter")) return syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0);
        if (!strcmp(n, "io_uring_register")) return syscall(SYS_io_uring_register, -1, 0, NULL, 0);
        if (!strcmp(n, "bpf")) return syscall(SYS_bpf, 5, NULL, 0);
        if (!strcmp(n, "keyctl")) return syscall(SYS_keyctl, 0, -3, 0);
        if (!strcmp(n, "add_key")) return syscall(SYS_add_key, "seed-no-type", "d", NULL, 0, -3);
        if (!strcmp(n, "request_key")) return syscall(SYS_request_key, "seed-no-type", "d", NULL, 0);
        if (!strcmp(n, "userfaultfd")) return syscall(SYS_userfaultfd, O_CLOEXEC | 1);
        if (!strcmp(n, "perf_event_open")) return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
        if (!strcmp(n, "kexec_load")) return syscall(SYS_kexec_load, 0, 0, NULL, 0);
        if (!strcmp(n, "kexec_file_load")) return syscall(SYS_kexec_file_load, -1, -1, 0, "", 0);
        if (!strcmp(n, "init_module")) return syscall(SYS_init_module, NULL, 0, "");
        if (!strcmp(n, "finit_module")) return syscall(SYS_finit_module, -1, "", 0);
        if (!strcmp(n, "delete_module")) return syscall(SYS_delete_module, "seed_none", 0);
        if (!strcmp(n, "mount")) return syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, NULL);
        if (!strcmp(n, "umount2")) return syscall(SYS_umount2, "/tmp", 0);
        if (!strcmp(n, "pivot_root")) return syscall(SYS_pivot_root, "/tmp", "/tmp");
        if (!strcmp(n, "move_mount")) return syscall(SYS_move_mount, -1, "", -1, "", 0);
        if (!strcmp(n, "open_tree")) return syscall(SYS_open_tree, AT_FDCWD, "/", 0);
        if (!strcmp(n, "fsopen")) return syscall(SYS_fsopen, "tmpfs", 0);
        if (!strcmp(n, "fsmount")) return syscall(SYS_fsmount, -1, 0, 0);
        if (!strcmp(n, "fspick")) return syscall(SYS_fspick, AT_FDCWD, "/", 0);
        if (!strcmp(n, "mount_setattr")) return syscall(SYS_mount_setattr, -1, "", 0x1000, NULL, 0);
        if (!strcmp(n, "unshare")) return syscall(SYS_unshare, 0);
        if (!strcmp(n, "unshare-user")) return syscall(SYS_unshare, CLONE_NEWUSER);
        if (!strcmp(n, "setns")) return syscall(SYS_setns, -1, 0);
        if (!strcmp(n, "clone-newuser")) return forked(syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
        if (!strcmp(n, "clone-newnet")) return forked(syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0));
        if (!strcmp(n, "clone-newns")) return forked(syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0));
        if (!strcmp(n, "clone-fork")) return forked(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0)) > 0 ? 0 : -1;
        if (!strcmp(n, "clone3")) {
                struct clone_args ca = {.exit_signal = SIGCHLD};
                long r = forked(syscall(SYS_clone3, &ca, sizeof ca));
                return r > 0 ? 0 : r;
        }
        if (!strcmp(n, "socket-vsock")) return socket(40, SOCK_STREAM, 0);
        if (!strcmp(n, "socket-unix")) return socket(AF_UNIX, SOCK_STREAM, 0) >= 0 ? 0 : -1;
        if (!strcmp(n, "tiocsti")) return ioctl(devnull, TIOCSTI, &a);
        if (!strcmp(n, "tiocsti-hibits")) return syscall(SYS_ioctl, devnull, (unsigned long)TIOCSTI | (1UL << 32), &a);
        if (!strcmp(n, "tioclinux")) return ioctl(devnull, TIOCLINUX, &a);
        if (!strcmp(n, "personality-aslr")) {
                long r = syscall(SYS_personality, ADDR_NO_RANDOMIZE);
                if (r >= 0)
                        syscall(SYS_personality, PER_LINUX);
                return r >= 0 ? 0 : r;
        }
        if (!strcmp(n, "personality-linux")) return syscall(SYS_personality, PER_LINUX) >= 0 ? 0 : -1;
        if (!strcmp(n, "acct")) return syscall(SYS_acct, NULL);
        if (!strcmp(n, "swapon")) return syscall(SYS_swapon, "/nonexistent", 0);
        if (!strcmp(n, "swapoff")) return syscall(SYS_swapoff, "/nonexistent");
        if (!strcmp(n, "reboot")) return syscall(SYS_reboot, 0, 0, 0, NULL);
        if (!strcmp(n, "settimeofday")) return syscall(SYS_settimeofday, NULL, NULL);
        if (!strcmp(n, "clock_settime")) return syscall(SYS_clock_settime, 0, NULL);
        if (!strcmp(n, "syslog")) return syscall(SYS_syslog, 10, NULL, 0);
        if (!strcmp(n, "pidfd_getfd")) return syscall(SYS_pidfd_getfd, -1, 0, 0);
        if (!strcmp(n, "process_madvise")) return syscall(SYS_process_madvise, -1, NULL, 0, 0, 0);
        if (!strcmp(n, "kcmp")) return syscall(SYS_kcmp, getpid(), getpid(), 0, 0, 0);
        if (!strcmp(n, "open_by_handle_at")) return syscall(SYS_open_by_handle_at, -1, NULL, 0);
        if (!strcmp(n, "fanotify_init")) return syscall(SYS_fanotify_init, 0, 0);
#if defined(__x86_64__)
        if (!strcmp(n, "x32")) return syscall(0x40000000 | SYS_getpid);
        if (!strcmp(n, "iopl")) return syscall(SYS_iopl, 3);
#endif
        errno = ENOENT;
        return -2;
}

/* Connects to a TCP address or an abstract Unix socket within 3 s. */
static int try_connect(int family, const void *addr, socklen_t len) {
        int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return errno;
        if (connect(fd, addr, len) < 0) {
                if (errno != EINPROGRESS)
                        return errno;
                struct pollfd pf = {.fd = fd, .events = POLLOUT};
                if (poll(&pf, 1, 3000) <= 0)
                        return ETIMEDOUT;
                int err = 0;
                socklen_t el = sizeof err;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err)
                        return err;
        }
        close(fd);
        return 0;
}

/* Every process keeps forking, forever; a failed fork is retried later. A
 * shell's bomb dies out instead: a shell exits when it cannot fork. */
static _Noreturn void bomb(void) {
        for (;;) {
                long wait_ms = fork() < 0 ? 100 : 5;
                struct timespec ts = {0, wait_ms * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
}

int main(int argc, char **argv) {
        if (argc == 3 && !strcmp(argv[1], "bomb")) /* argv[2]: a marker for ps */
                bomb();
        if (argc == 4 && !strcmp(argv[1], "tcp")) {
                struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
                if (inet_pton(AF_INET, argv[2], &sin.sin_addr) != 1)
                        return 2;
                int e = try_connect(AF_INET, &sin, sizeof sin);
                printf("tcp %s %s\n", argv[2], e ? strerror(e) : "connected");
                return 0;
        }
        if (argc == 3 && !strcmp(argv[1], "abstract")) {
                struct sockaddr_un sun = {.sun_family = AF_UNIX};
                size_t n = strlen(argv[2]);
                if (n + 1 > sizeof sun.sun_path)
                        return 2;
                memcpy(sun.sun_path + 1, argv[2], n);
                int e = try_connect(AF_UNIX, &sun, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n));
                printf("abstract %s\n", e ? strerror(e) : "connected");
                return 0;
        }
        if (argc >= 2 && !strcmp(argv[1], "sys")) {
                for (int i = 2; i < argc; i++) {
                        errno = 0;
                        long r = probe(argv[i]);
                        printf("%s %d\n", argv[i], r == -2 ? -1 : r < 0 ? errno : 0);
                        fflush(stdout);
                }
                return 0;
        }
        return 2;
}

#else /* the tests */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "base/log.h"
#include "base/priv.h"
#include "sandbox/door.h"
#include "sandbox/sandbox.h"

#include "../common/comment.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/close_range.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <limits.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#define CANARY_NAME "SEED_TEST_CANARY_SECRET"

static char root[256];  /* temp dir holding everything */
static char seed[512];  /* a fake Seed folder = the workspace */
static char cache[PATH_MAX];
static char *unavailable; /* why bwrap cannot run here, or NULL */
static char probe_host[PATH_MAX]; /* the probe, built into the workspace */
#define PROBE "/workspace/organism/probe" /* ... as seen inside */
static char *no_probe;    /* why it could not be built, or NULL */
static char *const evolvable[] = {"organism/", "knowledge/", "skills/", NULL};

static void write_in(const char *rel, const char *content) {
        _cleanup_free_ char *p = NULL;
        assert_true(xasprintf(&p, "%s/%s", seed, rel) >= 0);
        assert_int_equal(write_file_atomic(p, content, strlen(content), 0600), 0);
}

static void mkdir_in(const char *rel) {
        _cleanup_free_ char *p = NULL;
        assert_true(xasprintf(&p, "%s/%s", seed, rel) >= 0);
        assert_int_equal(mkdir_p(p, 0755), 0);
}

/* This very file, compiled with -DSANDBOX_PROBE, into organism/. */
static void build_probe(void) {
        snprintf(probe_host, sizeof probe_host, "%s/organism/probe", seed);
        if (access("/usr/bin/cc", X_OK) < 0) {
                no_probe = strdup("no C compiler at /usr/bin/cc to build the probe");
                return;
        }
        char *argv[] = {"/usr/bin/cc", "-O1", "-DSANDBOX_PROBE", "-o", probe_host,
                        SEED_SOURCE_ROOT "/tests/integration/test-sandbox.c", NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        struct proc_result res = {0};
        int r = proc_run(&(struct proc_opts){.argv = argv, .envp = envp, .stdin_fd = -1, .out_fd = -1,
                                             .timeout_ms = 120000},
                         &res);
        if (r < 0 || res.exit_code != 0)
                no_probe = strdup(r < 0 ? "cannot run cc" : res.output ? res.output : "cc failed");
        proc_result_done(&res);
}

static int setup(void **state) {
        (void)state;
        char tmpl[] = "/tmp/itest-sandbox.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        snprintf(root, sizeof root, "%s", tmpl);
        snprintf(seed, sizeof seed, "%s/seed", root);
        mkdir_in("kernel");
        mkdir_in("organism");
        mkdir_in("knowledge");
        mkdir_in("skills");
        mkdir_in(".git");
        mkdir_in(".seed/secrets");
        mkdir_in(".seed/cache");
        write_in(".seed/secrets/x", "top-secret-canary\n");
        write_in(".git/HEAD", "ref: refs/heads/main\n");
        write_in("kernel/main.c", "int main(void) { return 0; }\n");
        snprintf(cache, sizeof cache, "%s/.seed/cache", seed);
        char *msg = NULL;
        if (sandbox_check(&msg) < 0)
                unavailable = msg ? msg : strdup("sandbox_check failed");
        else
                free(msg);
        build_probe();
        return 0;
}

static int teardown(void **state) {
        (void)state;
        rm_rf(root);
        free(unavailable);
        free(no_probe);
        return 0;
}

static void require_bwrap(void) {
        if (unavailable) {
                print_message("# skipped: %s\n", unavailable);
                skip();
        }
}

static void require_probe(void) {
        require_bwrap();
        if (no_probe) {
                print_message("# skipped: %s\n", no_probe);
                skip();
        }
}

static struct sandbox_policy *policy(enum sandbox_profile profile) {
        struct sandbox_spec spec = {
                .profile = profile,
                .seed_dir = seed,
                .workspace = seed,
                .evolvable = evolvable,
                .workspace_readonly = profile == SANDBOX_LIVE || profile == SANDBOX_PREVIEW,
                .cache_dir = cache,
                .port = 8080,
        };
        struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        return p;
}

/* Runs sh -c script in a sandbox of profile; returns the exit code and
 * hands the output to *ret_out (caller frees). */
static int run_sh(enum sandbox_profile profile, const char *script, int timeout_ms, char **ret_out) {
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = policy(profile);
        char *cmd[] = {"/bin/sh", "-c", (char *)script, NULL};
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, cmd, timeout_ms, &res), 0);
        assert_false(res.timed_out);
        if (ret_out)
                *ret_out = TAKE_PTR(res.output);
        proc_result_done(&res);
        return res.exit_code;
}

static void test_check(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *msg = NULL;
        assert_int_equal(sandbox_check(&msg), 0);
        assert_string_equal(sandbox_bwrap_path(), "/usr/bin/bwrap");
        /* `seed doctor`'s rows, one by one, agree. */
        char *what = NULL, *fix = NULL;
        assert_int_equal(sandbox_check_bwrap(&what, &fix), 0);
        assert_int_equal(sandbox_check_userns(&what, &fix), 0);
        assert_int_equal(sandbox_check_seccomp(&what, &fix), 0);
        assert_null(what);
        assert_null(fix);
}

static void test_true(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = policy(SANDBOX_EVOLUTION);
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, (char *const[]){"/bin/true", NULL}, 30000, &res), 0);
        assert_int_equal(res.exit_code, 0);
        proc_result_done(&res);
        assert_int_equal(sandbox_run(p, (char *const[]){"/bin/false", NULL}, 30000, &res), 0);
        assert_int_equal(res.exit_code, 1);
        proc_result_done(&res);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The environment inside is exactly the policy's list, nothing inherited. */
static void test_env_exact(void **state) {
        (void)state;
        require_bwrap();
        enum sandbox_profile profiles[] = {SANDBOX_EVOLUTION, SANDBOX_LIVE};
        for (size_t k = 0; k < ARRAY_SIZE(profiles); k++) {
                _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = policy(profiles[k]);
                struct proc_result res = {0};
                assert_int_equal(sandbox_run(p, (char *const[]){"/usr/bin/env", NULL}, 30000, &res), 0);
                assert_int_equal(res.exit_code, 0);
                assert_null(strstr(res.output, CANARY_NAME));
                _cleanup_strv_free_ char **got = NULL, **want = NULL;
                for (char *line = strtok(res.output, "\n"); line; line = strtok(NULL, "\n"))
                        assert_int_equal(strv_push(&got, line), 0);
                for (char **e = p->env; *e; e++)
                        assert_int_equal(strv_push(&want, *e), 0);
                proc_result_done(&res);
                assert_int_equal(strv_length(got), strv_length(want));
                qsort(got, strv_length(got), sizeof(char *), cmp_str);
                qsort(want, strv_length(want), sizeof(char *), cmp_str);
                for (size_t i = 0; want[i]; i++)
                        assert_string_equal(got[i], want[i]);
        }
}

static void test_workspace_writes(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *out = NULL;
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, "echo x > /workspace/kernel/x", 30000, NULL), 0);
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, "echo x > /workspace/newroot", 30000, NULL), 0);
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, "rm /workspace/kernel/main.c", 30000, NULL), 0);
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "echo hello > /workspace/organism/x && "
                                                   "echo k > /workspace/knowledge/k",
                                30000, &out),
                         0);
        _cleanup_free_ char *kx = NULL, *ox = NULL, *nr = NULL;
        assert_true(xasprintf(&kx, "%s/kernel/x", seed) >= 0);
        assert_true(xasprintf(&ox, "%s/organism/x", seed) >= 0);
        assert_true(xasprintf(&nr, "%s/newroot", seed) >= 0);
        assert_false(path_exists(kx));
        assert_false(path_exists(nr));
        assert_true(path_exists(ox));
        /* The live organism cannot write even its own folder. */
        assert_int_not_equal(run_sh(SANDBOX_LIVE, "echo y > /workspace/organism/y", 30000, NULL), 0);
        /* Build cache: writable for evolutions, absent for the live organism. */
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "mkdir -p \"$npm_config_cache\" && touch /cache/c", 30000,
                                NULL),
                         0);
        assert_int_not_equal(run_sh(SANDBOX_LIVE, "test -e /cache", 30000, NULL), 0);
}

static void test_seed_hidden(void **state) {
        (void)state;
        require_bwrap();
        enum sandbox_profile profiles[] = {SANDBOX_EVOLUTION, SANDBOX_BUILD, SANDBOX_LIVE};
        for (size_t k = 0; k < ARRAY_SIZE(profiles); k++) {
                _cleanup_free_ char *out = NULL;
                assert_int_equal(run_sh(profiles[k], "ls -A /workspace/.seed", 30000, &out), 0);
                assert_string_equal(out, "");
                assert_int_not_equal(run_sh(profiles[k], "cat /workspace/.seed/secrets/x", 30000, NULL), 0);
                _cleanup_free_ char *grep = NULL;
                /* Nowhere in the sandbox's files. */
                assert_int_not_equal(run_sh(profiles[k],
                                            "grep -rqs top-secret-canary /workspace /tmp /home /run 2>/dev/null",
                                            30000, &grep),
                                     0);
        }
        _cleanup_free_ char *git = NULL;
        assert_int_equal(run_sh(SANDBOX_LIVE, "ls -A /workspace/.git", 30000, &git), 0);
        assert_string_equal(git, "");
        _cleanup_free_ char *head = NULL;
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "cat /workspace/.git/HEAD", 30000, &head), 0);
        assert_non_null(strstr(head, "refs/heads/main"));
}

/* The live data's backups (.seed/backups) are read by the kernel alone:
 * no sandbox of any profile sees them, at the workspace's path or the
 * host's. */
static void test_backups_hidden(void **state) {
        (void)state;
        require_bwrap();
        mkdir_in(".seed/backups");
        write_in(".seed/backups/manual-1-ab.dump", "PGDMP-backup-canary\n");
        _cleanup_free_ char *host = NULL;
        assert_true(xasprintf(&host, "cat '%s/.seed/backups/manual-1-ab.dump'", seed) >= 0);
        enum sandbox_profile profiles[] = {SANDBOX_EVOLUTION, SANDBOX_BUILD, SANDBOX_LIVE, SANDBOX_PREVIEW};
        for (size_t k = 0; k < ARRAY_SIZE(profiles); k++) {
                _cleanup_free_ char *out = NULL, *grep = NULL;
                assert_int_not_equal(run_sh(profiles[k], "ls -A /workspace/.seed/backups", 30000, &out), 0);
                assert_int_not_equal(run_sh(profiles[k], "cat /workspace/.seed/backups/manual-1-ab.dump", 30000, NULL),
                                     0);
                assert_int_not_equal(run_sh(profiles[k], host, 30000, NULL), 0);
                assert_int_not_equal(run_sh(profiles[k],
                                            "grep -rqs backup-canary /workspace /tmp /home /run /cache 2>/dev/null",
                                            30000, &grep),
                                     0);
        }
}

static void test_pg_socket_dir(void **state) {
        (void)state;
        require_bwrap();
        /* .seed/run holds PostgreSQL's socket, and possibly other entries. */
        mkdir_in(".seed/run/organism");
        write_in(".seed/run/organism/http.sock", "live-app-canary\n");
        write_in(".seed/run/.s.PGSQL.5432.lock", "pg-lock\n");
        _cleanup_free_ char *pg = NULL;
        assert_true(xasprintf(&pg, "%s/.seed/run", seed) >= 0);
        struct sandbox_spec spec = {
                .profile = SANDBOX_EVOLUTION, .seed_dir = seed, .workspace = seed, .pg_socket_dir = pg,
        };
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        char *cmd[] = {"/bin/sh", "-c", "cat /run/postgresql/.s.PGSQL.5432.lock; ls -A /run/postgresql/organism; "
                       "touch /run/postgresql/x || echo read-only", NULL};
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, cmd, 30000, &res), 0);
        assert_non_null(strstr(res.output, "pg-lock\n"));
        assert_non_null(strstr(res.output, "read-only\n"));
        assert_null(strstr(res.output, "http.sock"));
        proc_result_done(&res);
}

static void test_host_dirs_absent(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *home = NULL, *uid = NULL;
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "ls -A /home", 30000, &home), 0);
        assert_string_equal(home, "sandbox\n");
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, "test -e /root", 30000, NULL), 0);
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, "test -e /work", 30000, NULL), 0);
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, "test -e /var", 30000, NULL), 0);
        /* The host's /tmp (where the Seed lives here) is not the sandbox's. */
        _cleanup_free_ char *script = NULL;
        assert_true(xasprintf(&script, "test -e '%s'", root) >= 0);
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, script, 30000, NULL), 0);
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "id -u", 30000, &uid), 0);
        assert_int_equal(atoi(uid), (int)getuid());
        assert_int_not_equal(atoi(uid), 0);
}

/* Host pids whose command line contains marker. */
static int count_procs(const char *marker) {
        DIR *d = opendir("/proc");
        assert_non_null(d);
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                char path[300];
                snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
                _cleanup_free_ char *cmd = NULL;
                size_t len = 0;
                if (read_file(path, 65536, &cmd, &len) < 0)
                        continue;
                for (size_t i = 0; i < len; i++)
                        if (!cmd[i])
                                cmd[i] = ' ';
                if (strstr(cmd, marker))
                        n++;
        }
        closedir(d);
        return n;
}

static void test_timeout_kills_group(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = policy(SANDBOX_EVOLUTION);
        /* A child in the background and one in the foreground. */
        char *cmd[] = {"/bin/sh", "-c", "sleep 100.4711 & sleep 100.4712; echo never", NULL};
        struct proc_result res = {0};
        int64_t t0 = now_ms();
        assert_int_equal(sandbox_run(p, cmd, 1000, &res), 0);
        assert_true(res.timed_out);
        assert_true(now_ms() - t0 < 20000);
        assert_null(strstr(res.output ? res.output : "", "never"));
        proc_result_done(&res);
        int64_t deadline = now_ms() + 10000;
        while (count_procs("100.471") > 0 && now_ms() < deadline) {
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        assert_int_equal(count_procs("100.471"), 0);
}

static void test_output_capped(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *out = NULL;
        assert_int_equal(run_sh(SANDBOX_EVOLUTION,
                                "printf START; head -c 5000000 /dev/zero | tr '\\0' x; printf END", 60000, &out),
                         0);
        size_t n = strlen(out);
        assert_true(n <= 2 * 1024 * 1024 + 100);
        assert_true(n >= 2 * 1024 * 1024);
        assert_true(startswith(out, "STARTxxx"));
        assert_true(endswith(out, "xxxEND"));
        assert_non_null(strstr(out, "bytes omitted"));
}

static void test_pid_namespace(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *out = NULL;
        /* Few processes visible, and pid 1 is the sandbox's own init. */
        assert_int_equal(run_sh(SANDBOX_EVOLUTION,
                                "n=0; for d in /proc/[0-9]*; do n=$((n+1)); done; echo $n $$; "
                                "tr '\\0' ' ' < /proc/1/cmdline",
                                30000, &out),
                         0);
        int nprocs = 0, self = 0;
        assert_int_equal(sscanf(out, "%d %d", &nprocs, &self), 2);
        assert_true(nprocs <= 4);
        assert_true(self < 10);
        assert_non_null(strstr(out, "bwrap")); /* the host's pid 1 is not bwrap */
}

static void test_no_leaked_fds(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *out = NULL;
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "ls /proc/self/fd | sort -n | tr '\\n' ' '", 30000, &out), 0);
        assert_string_equal(out, "0 1 2 3 ");
}

/* A passed fd reaches the command at its number, and only when passed. */
static void test_keep_fds(void **state) {
        (void)state;
        require_bwrap();
        int fds[2];
        assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
        int w = dup3(fds[1], 42, O_CLOEXEC);
        assert_int_equal(w, 42);
        close(fds[1]);
        struct sandbox_spec spec = {
                .profile = SANDBOX_LIVE, .seed_dir = seed, .workspace = seed, .workspace_readonly = true,
                .keep_fds = &w, .n_keep_fds = 1,
        };
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        char *cmd[] = {"/bin/sh", "-c", "ls /proc/self/fd | sort -n | tr '\\n' ' '; echo via-42 > /proc/self/fd/42", NULL};
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, cmd, 30000, &res), 0);
        assert_int_equal(res.exit_code, 0);
        assert_string_equal(res.output, "0 1 2 3 42 ");
        proc_result_done(&res);
        close(w);
        char buf[64] = {0};
        assert_int_equal(read(fds[0], buf, sizeof buf - 1), 7);
        assert_string_equal(buf, "via-42\n");
        close(fds[0]);

        /* Without keep_fds an open fd of ours never arrives. */
        int other = open("/dev/null", O_RDONLY); /* not even without O_CLOEXEC */
        assert_true(other >= 0);
        _cleanup_free_ char *out = NULL, *script = NULL;
        assert_true(xasprintf(&script, "test -e /proc/self/fd/%d && echo leaked; true", other) >= 0);
        assert_int_equal(run_sh(SANDBOX_LIVE, script, 30000, &out), 0);
        assert_string_equal(out, "");
        close(other);
}

/* Live: nothing outside /tmp and the home is writable, not even the
 * sandbox's own root, so no /run/organism can be made up; hidden places
 * are read-only in every profile. */
static void test_read_only(void **state) {
        (void)state;
        require_bwrap();
        const char *script = "for p in /run/organism /x /run/seed/x /workspace/.seed/x /workspace/x; do "
                             "  mkdir \"$p\" 2>/dev/null && echo \"wrote $p\"; "
                             "done; "
                             "ln -s /tmp/evil.sock /run/organism.sock 2>/dev/null && echo wrote-link; "
                             "touch /tmp/t && touch \"$HOME/h\" && echo scratch-ok";
        _cleanup_free_ char *out = NULL;
        assert_int_equal(run_sh(SANDBOX_LIVE, script, 30000, &out), 0);
        assert_string_equal(out, "scratch-ok\n");
        _cleanup_free_ char *evo = NULL;
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "touch /workspace/.seed/x 2>/dev/null && echo wrote; true", 30000,
                                &evo),
                         0);
        assert_string_equal(evo, "");
}

/* A long-running sandbox: SIGTERM reaches the command inside (not just
 * bwrap), and stopping one still being set up leaves nothing behind. */
static void test_start_stop(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = policy(SANDBOX_LIVE);
        int pipefd[2];
        assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
        char *cmd[] = {"/bin/sh", "-c", "trap 'echo got-term; exit 7' TERM; echo ready; sleep 100.4721 & wait",
                       NULL};
        struct sandbox_child c;
        assert_int_equal(sandbox_start(p, cmd, pipefd[1], &c), 0);
        close(pipefd[1]);
        assert_true(c.pid > 1);
        assert_true(c.init_pid > 1);
        assert_true(c.init_pid != c.pid);
        char buf[256];
        size_t len = 0;
        while (!memmem(buf, len, "ready", 5) && len < sizeof buf - 1) {
                ssize_t n = read(pipefd[0], buf + len, sizeof buf - 1 - len);
                assert_true(n > 0);
                len += (size_t)n;
        }
        assert_int_equal(sandbox_stop(&c, 10000), 7);
        sandbox_child_done(&c);
        for (;;) {
                ssize_t n = read(pipefd[0], buf + len, sizeof buf - 1 - len);
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = 0;
        close(pipefd[0]);
        assert_non_null(strstr(buf, "got-term"));

        /* Stopped at once, repeatedly: no sandbox survives its bwrap. */
        char *cmd2[] = {"/bin/sh", "-c", "sleep 100.4722", NULL};
        for (int i = 0; i < 10; i++) {
                assert_int_equal(sandbox_start(p, cmd2, -1, &c), 0);
                assert_true(sandbox_stop(&c, 2000) >= 0);
                sandbox_child_done(&c);
        }
        int64_t deadline = now_ms() + 10000;
        while ((count_procs("100.4721") > 0 || count_procs("100.4722") > 0) && now_ms() < deadline) {
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        assert_int_equal(count_procs("100.4721"), 0);
        assert_int_equal(count_procs("100.4722"), 0);
}

/* The errno the probe reported for name, or -1000 if it did not. */
static int probe_errno(const char *out, const char *name) {
        size_t n = strlen(name);
        for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, name, n) == 0 && line[n] == ' ')
                        return atoi(line + n + 1);
        return -1000;
}

/* Every call the filter must refuse, as the probe names them. */
static const char *const denied[] = {
        "ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter",
        "io_uring_register", "bpf", "keyctl", "add_key", "request_key", "userfaultfd", "perf_event_open",
        "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "mount", "umount2",
        "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount", "fspick", "mount_setattr", "unshare",
        "unshare-user", "setns", "clone-newuser", "clone-newnet", "clone-newns", "socket-vsock", "tiocsti",
        "tiocsti-hibits", "tioclinux", "personality-aslr", "acct", "swapon", "swapoff", "reboot",
        "settimeofday", "clock_settime", "syslog", "pidfd_getfd", "process_madvise", "kcmp",
        "open_by_handle_at", "fanotify_init",
#if defined(__x86_64__)
        "iopl",
#endif
};
/* ... and what must keep working. */
static const char *const allowed[] = {"clone-fork", "socket-unix", "personality-linux"};

static char *probe_script(const char *const *names, size_t n) {
        _cleanup_free_ char *script = strdup("exec " PROBE " sys");
        assert_non_null(script);
        for (size_t i = 0; i < n; i++) {
                char *next = NULL;
                assert_true(xasprintf(&next, "%s %s", script, names[i]) >= 0);
                free(script);
                script = next;
        }
        return TAKE_PTR(script);
}

/* In every profile, each refused call fails with EPERM (clone3: ENOSYS,
 * so that libc falls back to clone), and ordinary calls still work. */
static void test_seccomp_denies(void **state) {
        (void)state;
        require_probe();
        _cleanup_free_ char *deny = probe_script(denied, ARRAY_SIZE(denied));
        _cleanup_free_ char *allow = probe_script(allowed, ARRAY_SIZE(allowed));
        _cleanup_free_ char *script = NULL;
        assert_true(xasprintf(&script, "%s clone3 && %s", deny + strlen("exec "), allow) >= 0);
        enum sandbox_profile profiles[] = {SANDBOX_EVOLUTION, SANDBOX_LIVE};
        for (size_t k = 0; k < ARRAY_SIZE(profiles); k++) {
                _cleanup_free_ char *out = NULL;
                assert_int_equal(run_sh(profiles[k], script, 60000, &out), 0);
                for (size_t i = 0; i < ARRAY_SIZE(denied); i++)
                        if (probe_errno(out, denied[i]) != EPERM)
                                fail_msg("%s in a %s sandbox: errno %d, not EPERM", denied[i],
                                         sandbox_profile_name(profiles[k]), probe_errno(out, denied[i]));
                assert_int_equal(probe_errno(out, "clone3"), ENOSYS);
                for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
                        if (probe_errno(out, allowed[i]) != 0)
                                fail_msg("%s fails in a %s sandbox: errno %d", allowed[i],
                                         sandbox_profile_name(profiles[k]), probe_errno(out, allowed[i]));
                _cleanup_free_ char *status = NULL;
                assert_int_equal(run_sh(profiles[k], "grep '^Seccomp:' /proc/self/status", 30000, &status), 0);
                assert_string_equal(status, "Seccomp:\t2\n");
        }
}

/* The same calls outside any sandbox: not EPERM, so the EPERMs above are
 * the filter's (many others fail there anyway, for want of privilege). */
static void test_seccomp_host_control(void **state) {
        (void)state;
        require_probe();
        const char *names[] = {"ptrace", "process_vm_readv", "process_vm_writev", "io_uring_enter", "setns",
                               "unshare", "open_tree", "tiocsti", "tiocsti-hibits", "tioclinux", "personality-aslr",
                               "pidfd_getfd", "kcmp", "perf_event_open", "clock_settime", "clone3",
                               "socket-vsock", "add_key", "keyctl"};
        char *argv[ARRAY_SIZE(names) + 3];
        argv[0] = probe_host;
        argv[1] = "sys";
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                argv[i + 2] = (char *)names[i];
        argv[ARRAY_SIZE(names) + 2] = NULL;
        struct proc_result res = {0};
        assert_int_equal(proc_run(&(struct proc_opts){.argv = argv, .stdin_fd = -1, .out_fd = -1, .timeout_ms = 30000},
                                  &res),
                         0);
        assert_int_equal(res.exit_code, 0);
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                int e = probe_errno(res.output, names[i]);
                if (e == -1000 || e == EPERM)
                        fail_msg("%s on the host: errno %d", names[i], e);
        }
        assert_int_not_equal(probe_errno(res.output, "clone3"), ENOSYS);
        proc_result_done(&res);
}

/* A system call of a foreign ABI (x32 on x86-64) cannot be inspected like
 * a native one: the process is killed instead. */
static void test_foreign_abi(void **state) {
        (void)state;
        require_probe();
#if defined(__x86_64__)
        _cleanup_free_ char *out = NULL;
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, PROBE " sys x32; echo rc=$?", 30000, &out), 0);
        assert_true(endswith(out, "rc=159\n")); /* 128 + SIGSYS ("Bad system call") */
        assert_null(strstr(out, "x32 ")); /* it never returned */
#else
        skip();
#endif
}

/* Builds, installs and commits still work under the filter. */
static void test_ordinary_work(void **state) {
        (void)state;
        require_bwrap();
        const char *script =
                "set -e; cd /tmp; "
                "printf '#include <stdio.h>\\nint main(void) { puts(\"compiled\"); return 0; }\\n' > t.c; "
                "cc -o t t.c; ./t; "
                "printf 'all:\\n\\t@echo made\\n' > Makefile; make; "
                "node -e 'console.log(\"node\", 6 * 7)'; "
                "echo npm $(npm_config_update_notifier=false npm --version); "
                "git init -q g; cd g; echo x > f; git add f; "
                "git -c user.name=s -c user.email=s@example.org commit -q -m first; "
                "echo commits $(git rev-list --count HEAD); "
                "unshare -U true 2>/dev/null && echo unshare-allowed || echo unshare-denied";
        _cleanup_free_ char *out = NULL;
        int code = run_sh(SANDBOX_EVOLUTION, script, 180000, &out);
        if (code != 0)
                fail_msg("ordinary work failed (%d): %s", code, out);
        assert_non_null(strstr(out, "compiled\n"));
        assert_non_null(strstr(out, "made\n"));
        assert_non_null(strstr(out, "node 42\n"));
        const char *npm = strstr(out, "npm ");
        assert_non_null(npm);
        assert_true(npm[4] >= '1' && npm[4] <= '9');
        assert_non_null(strstr(out, "commits 1\n"));
        assert_non_null(strstr(out, "unshare-denied\n"));
}

static int listen_tcp(const char *ip, int *ret_port) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        struct sockaddr_in sin = {.sin_family = AF_INET};
        assert_int_equal(inet_pton(AF_INET, ip, &sin.sin_addr), 1);
        assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
        assert_int_equal(listen(fd, 16), 0);
        socklen_t len = sizeof sin;
        assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
        *ret_port = ntohs(sin.sin_port);
        return fd;
}

/* The interface of the host's IPv4 default route ("" if none). */
static void default_route_interface(char *buf, size_t size) {
        buf[0] = 0;
        _cleanup_free_ char *routes = NULL;
        if (read_file("/proc/net/route", 256 * 1024, &routes, NULL) < 0)
                return;
        for (char *line = routes; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = 0;
                char iface[IFNAMSIZ + 1], dest[16];
                if (sscanf(line, "%16s %15s", iface, dest) == 2 && streq(dest, "00000000")) {
                        snprintf(buf, size, "%s", iface);
                        return;
                }
                line = nl ? nl + 1 : NULL;
        }
}

/* An IPv4 address of this host other than loopback, preferably that of the
 * default route's interface, or false. */
static bool host_address(char *buf, size_t size) {
        char def[IFNAMSIZ + 1];
        default_route_interface(def, sizeof def);
        struct ifaddrs *ifs = NULL;
        if (getifaddrs(&ifs) < 0)
                return false;
        bool found = false;
        for (int pass = 0; pass < 2 && !found; pass++)
                for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
                        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
                                continue;
                        if (pass == 0 && (!def[0] || !streq(i->ifa_name, def)))
                                continue;
                        struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
                        if ((ntohl(a.s_addr) >> 24) == 127)
                                continue;
                        found = inet_ntop(AF_INET, &a, buf, (socklen_t)size) != NULL;
                }
        freeifaddrs(ifs);
        return found;
}

/* Connections to the host's loopback (where the kernel's control port and
 * its proxy to the live app listen), to an abstract socket of the host's,
 * and to the host's outside address when there is one. */
static char *net_script(const char *probe, int port, const char *name, const char *ext, int ext_port) {
        char *s = NULL;
        assert_true(xasprintf(&s, "P='%s'; $P tcp 127.0.0.1 %d; $P abstract %s; [ -z '%s' ] || $P tcp '%s' %d",
                              probe, port, name, ext, ext, ext_port) >= 0);
        return s;
}

/* No child of ours is left (bwrap, the door's helper): the sandbox ends them
 * all. */
static void assert_no_children(void) {
        int64_t deadline = now_ms() + 10000;
        for (;;) {
                siginfo_t si = {0};
                errno = 0;
                int k = waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT); /* looks, reaps nothing */
                if (k < 0 && errno == ECHILD)
                        return;
                if (now_ms() >= deadline)
                        fail_msg("a child process is left (waitid: %d, pid %d)", k, (int)si.si_pid);
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
}

static const enum sandbox_profile all_profiles[] = {SANDBOX_EVOLUTION, SANDBOX_BUILD, SANDBOX_TEST, SANDBOX_LIVE,
                                                     SANDBOX_PREVIEW};

static bool profile_private(enum sandbox_profile p) {
        return p == SANDBOX_LIVE || p == SANDBOX_PREVIEW;
}

/* Like run_sh(), in a sandbox that has the egress proxy e as its way out
 * (NULL: none). */
static int run_sh_egress(enum sandbox_profile profile, struct egress *e, const char *label, const char *script,
                         char **ret_out) {
        struct sandbox_spec spec = {
                .profile = profile,
                .seed_dir = seed,
                .workspace = seed,
                .evolvable = evolvable,
                .workspace_readonly = profile_private(profile),
                .cache_dir = cache,
                .port = 8080,
                .egress = e,
                .label = label,
        };
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        char *cmd[] = {"/bin/sh", "-c", (char *)script, NULL};
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, cmd, 60000, &res), 0);
        assert_false(res.timed_out);
        *ret_out = TAKE_PTR(res.output);
        proc_result_done(&res);
        return res.exit_code;
}

/* "live: ", for output from inside. */
static const char *label_of(enum sandbox_profile p) {
        static char buf[32];
        snprintf(buf, sizeof buf, "%s: ", sandbox_profile_name(p));
        return buf;
}

static struct egress *new_egress(void) {
        struct egress *e = NULL;
        assert_int_equal(egress_new(&(struct egress_config){0}, &e), 0);
        return e;
}

/* The interfaces a sandbox sees: "lo" and nothing else, in every profile,
 * with and without a way out (the door is a socket, not an interface). */
static void test_only_loopback(void **state) {
        (void)state;
        require_bwrap();
        struct egress *e = new_egress();
        for (size_t k = 0; k < ARRAY_SIZE(all_profiles); k++)
                for (int with = 0; with < 2; with++) {
                        _cleanup_free_ char *out = NULL;
                        assert_int_equal(run_sh_egress(all_profiles[k], with ? e : NULL, NULL,
                                                       "cat /proc/net/dev; ls /proc/sys/net/ipv4/conf", &out),
                                         0);
                        int ifaces = 0;
                        bool lo = false;
                        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
                                while (*line == ' ')
                                        line++;
                                if (!strchr(line, ':'))
                                        continue;
                                if (startswith(line, "Inter-") || startswith(line, "face"))
                                        continue;
                                ifaces++;
                                lo |= startswith(line, "lo:");
                        }
                        if (ifaces != 1 || !lo)
                                fail_msg("%s sandbox (%s a way out): %d interfaces", sandbox_profile_name(all_profiles[k]),
                                         with ? "with" : "without", ifaces);
                }
        egress_free(e);
        assert_no_children();
}

/* Every profile: the host's loopback (where the kernel's control port and
 * its proxy to the live app listen), its abstract Unix sockets and its
 * outside address are out of reach, with or without a way out. */
static void test_network_isolated(void **state) {
        (void)state;
        require_probe();
        int port = 0;
        int lfd = listen_tcp("127.0.0.1", &port);
        char name[64];
        snprintf(name, sizeof name, "seed-itest-sandbox-%d", (int)getpid());
        int afd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        memcpy(sun.sun_path + 1, name, strlen(name));
        socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
        assert_int_equal(bind(afd, (struct sockaddr *)&sun, alen), 0);
        assert_int_equal(listen(afd, 16), 0);
        char ext[INET_ADDRSTRLEN] = "";
        int ext_port = 0, efd = -1;
        if (host_address(ext, sizeof ext))
                efd = listen_tcp(ext, &ext_port);
        else
                print_message("# no non-loopback address here: the host's outside address is not tried\n");

        _cleanup_free_ char *script = net_script(PROBE, port, name, ext, ext_port);
        _cleanup_free_ char *host_script = net_script(probe_host, port, name, ext, ext_port);
        /* On the host, every one of them answers. */
        struct proc_result res = {0};
        char *argv[] = {"/bin/sh", "-c", host_script, NULL};
        assert_int_equal(proc_run(&(struct proc_opts){.argv = argv, .stdin_fd = -1, .out_fd = -1, .timeout_ms = 30000},
                                  &res),
                         0);
        assert_non_null(strstr(res.output, "tcp 127.0.0.1 connected\n"));
        assert_non_null(strstr(res.output, "abstract connected\n"));
        if (efd >= 0) {
                _cleanup_free_ char *ok = NULL;
                assert_true(xasprintf(&ok, "tcp %s connected\n", ext) >= 0);
                assert_non_null(strstr(res.output, ok));
        }
        proc_result_done(&res);

        struct egress *e = new_egress();
        for (size_t k = 0; k < ARRAY_SIZE(all_profiles); k++)
                for (int with = 0; with < 2; with++) {
                        _cleanup_free_ char *out = NULL;
                        assert_int_equal(run_sh_egress(all_profiles[k], with ? e : NULL, NULL, script, &out), 0);
                        print_comment(label_of(all_profiles[k]), out);
                        assert_non_null(strstr(out, "tcp 127.0.0.1 "));
                        assert_null(strstr(out, "connected"));
                        assert_non_null(strstr(out, "abstract "));
                        if (efd >= 0) {
                                _cleanup_free_ char *tried = NULL;
                                assert_true(xasprintf(&tried, "tcp %s ", ext) >= 0);
                                assert_non_null(strstr(out, tried));
                        }
                }
        egress_free(e);
        if (efd >= 0)
                close(efd);
        close(lfd);
        close(afd);
        assert_no_children();
}

/* With the proxy, every profile finds its door at HTTPS_PROXY and gets the
 * proxy's answer there; without it, there is nothing to connect to. */
/* Node.js's fetch() and https.get(), as an app would use them: each prints
 * "fetch: <what happened>" / "https: <what happened>". */
#define NODE_FETCH                                                                                             \
        "const why = (e) => (e.cause && e.cause.message) || e.message;"                                         \
        "fetch(\"https://example.com/\").then(r => console.log(\"fetch: status\", r.status),"                    \
        "  e => console.log(\"fetch:\", why(e)));"                                                               \
        "require(\"https\").get(\"https://example.com/\", r => console.log(\"https: status\", r.statusCode))"     \
        "  .on(\"error\", e => console.log(\"https:\", why(e)));"

static void test_door_every_profile(void **state) {
        (void)state;
        require_probe();
        struct egress *e = new_egress();
        const char *door = "tcp 127.0.0.1 ", *connected = "tcp 127.0.0.1 connected\n";
        for (size_t k = 0; k < ARRAY_SIZE(all_profiles); k++) {
                char script[512];
                snprintf(script, sizeof script,
                         "echo \"proxy=$HTTPS_PROXY\"; " PROBE " tcp 127.0.0.1 %d; "
                         "curl -sS -m 20 -o /dev/null https://example.com/ 2>&1; echo curl=$?; "
                         "node -e '%s'",
                         EGRESS_PORT, NODE_FETCH);
                _cleanup_free_ char *out = NULL, *none = NULL;
                assert_int_equal(run_sh_egress(all_profiles[k], e, "itest", script, &out), 0);
                print_comment(label_of(all_profiles[k]), out);
                assert_non_null(strstr(out, "proxy=http://127.0.0.1:3128\n"));
                assert_non_null(strstr(out, connected));
                /* Not granted: the proxy refuses the tunnel (curl: exit 56),
                 * and Node.js's fetch() and https hear it from the proxy too. */
                assert_non_null(strstr(out, "403"));
                assert_null(strstr(out, "curl=0\n"));
                assert_non_null(strstr(out, "fetch: egress proxy refused example.com:443: HTTP/1.1 403"));
                assert_non_null(strstr(out, "https: egress proxy refused example.com:443: HTTP/1.1 403"));

                assert_int_equal(run_sh_egress(all_profiles[k], NULL, NULL, script, &none), 0);
                assert_non_null(strstr(none, "proxy=\n"));
                assert_non_null(strstr(none, door));
                assert_null(strstr(none, connected));
                assert_null(strstr(none, "curl=0\n"));
                assert_non_null(strstr(none, "fetch: "));
                assert_null(strstr(none, "fetch: status"));
        }
        egress_free(e);
        assert_no_children();
}

/* Nothing inside resolves a name (no resolver is reachable: DNS is no way
 * out either), whatever the host can resolve. */
static void test_no_dns(void **state) {
        (void)state;
        require_bwrap();
        struct egress *e = new_egress();
        for (size_t k = 0; k < ARRAY_SIZE(all_profiles); k++) {
                _cleanup_free_ char *out = NULL;
                int code = run_sh_egress(all_profiles[k], e, NULL,
                                         "getent hosts deb.debian.org; echo getent=$?", &out);
                assert_int_equal(code, 0);
                assert_null(strstr(out, "getent=0\n"));
        }
        egress_free(e);
}

/* Many starts of sandboxes with a door, two at a time, while other
 * processes keep creating and dropping network namespaces: each one must
 * run and find its door. Guards the door's making (sandbox/door.c) against
 * bwrap's own setup of the namespace's lo, which runs at the same time.
 * SEED_SANDBOX_STRESS=N sets the number of starts (0 skips the test). */
#define STRESS_STARTS 100
#define STRESS_PARALLEL 2
#define STRESS_CHURNERS 4

struct stress {
        const struct sandbox_policy *p;
        int total;
        atomic_int next, failed, errors;
        pthread_mutex_t lock;
        char first_failure[512];
};

static void *stress_worker(void *arg) {
        struct stress *s = arg;
        char door[16];
        snprintf(door, sizeof door, "%d", EGRESS_PORT);
        char *cmd[] = {PROBE, "tcp", "127.0.0.1", door, NULL};
        while (atomic_fetch_add(&s->next, 1) < s->total) {
                struct proc_result res = {0};
                int r = sandbox_run(s->p, cmd, 60000, &res);
                if (r < 0)
                        atomic_fetch_add(&s->errors, 1);
                else if (res.exit_code != 0 || res.timed_out || !res.output || !strstr(res.output, " connected\n")) {
                        pthread_mutex_lock(&s->lock);
                        if (atomic_fetch_add(&s->failed, 1) == 0)
                                snprintf(s->first_failure, sizeof s->first_failure, "exit %d: %s", res.exit_code,
                                         res.output ? res.output : "");
                        pthread_mutex_unlock(&s->lock);
                }
                proc_result_done(&res);
        }
        return NULL;
}

/* A child leading its own process group that keeps creating and dropping
 * network namespaces and bringing their lo up, as sandboxes do, and so keeps
 * the CPU busy and the host's network configuration lock (RTNL, which
 * bwrap's setup and the door's also take) contended: the order in which a
 * sandbox's setup steps run then varies the most. Where it cannot create
 * namespaces it only keeps a CPU busy. */
static pid_t churn(void) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid > 0) {
                (void)setpgid(pid, pid);
                return pid;
        }
        (void)setpgid(0, 0);
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a test that dies */
        for (;;) {
                pid_t g = fork();
                if (g == 0) {
                        if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
                                _exit(2);
                        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                        struct ifreq lo = {.ifr_name = "lo", .ifr_flags = IFF_UP};
                        (void)ioctl(s, SIOCSIFFLAGS, &lo);
                        _exit(0);
                }
                int status;
                if (g < 0 || waitpid(g, &status, 0) < 0)
                        _exit(1);
                if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
                        for (volatile unsigned long i = 0;; i++)
                                ;
        }
}

static void test_start_stress(void **state) {
        (void)state;
        require_probe();
        const char *env = getenv("SEED_SANDBOX_STRESS");
        int total = env ? atoi(env) : STRESS_STARTS;
        if (total <= 0) {
                print_message("# SKIP SEED_SANDBOX_STRESS=%s\n", env);
                skip();
        }
        struct egress *e = new_egress();
        struct sandbox_spec spec = {
                .profile = SANDBOX_EVOLUTION, .seed_dir = seed, .workspace = seed, .evolvable = evolvable,
                .cache_dir = cache, .egress = e,
        };
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        struct stress s = {.p = p, .total = total, .lock = PTHREAD_MUTEX_INITIALIZER};
        pid_t churners[STRESS_CHURNERS];
        for (size_t i = 0; i < ARRAY_SIZE(churners); i++)
                churners[i] = churn();
        int64_t start = now_ms();
        pthread_t t[STRESS_PARALLEL];
        for (size_t i = 0; i < ARRAY_SIZE(t); i++)
                assert_int_equal(pthread_create(&t[i], NULL, stress_worker, &s), 0);
        for (size_t i = 0; i < ARRAY_SIZE(t); i++)
                pthread_join(t[i], NULL);
        int64_t took = now_ms() - start;
        for (size_t i = 0; i < ARRAY_SIZE(churners); i++) {
                (void)kill(-churners[i], SIGKILL);
                (void)waitpid(churners[i], NULL, 0);
        }
        egress_free(e);
        print_message("# %d sandboxes with a door started, %d at a time, beside %d namespace churners, in %lld ms: "
                      "%d failed, %d could not start\n",
                      total, STRESS_PARALLEL, STRESS_CHURNERS, (long long)took, atomic_load(&s.failed),
                      atomic_load(&s.errors));
        if (atomic_load(&s.failed) > 0)
                print_comment("first failure: ", s.first_failure);
        assert_int_equal(atomic_load(&s.errors), 0);
        assert_int_equal(atomic_load(&s.failed), 0);
        assert_no_children();
}

/* sandbox_door_listen() makes the door inside the namespace of the given
 * pid, not ours, and it works before lo is up there (IP_FREEBIND): a
 * namespace of the test's own stands for the sandbox's, so that the order is
 * deterministic. From inside, a connection to 127.0.0.1:<port> reaches the
 * door; from outside (our namespace) the same address does not. */
static void test_door_in_namespace(void **state) {
        (void)state;
        require_bwrap();
        int go[2], rep[2];
        assert_int_equal(pipe2(go, O_CLOEXEC), 0);
        assert_int_equal(pipe2(rep, O_CLOEXEC), 0);
        const int port = 3999;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                /* Dropping root left the test undumpable, which would keep
                 * even its own user out of /proc/PID/ns (a sandbox's pid 1
                 * is exec'd, so dumpable). */
                if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0 || unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
                        _exit(3);
                char c = 'R';
                if (write(rep[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
                        _exit(4);
                /* Only now does lo come up, as bwrap brings it up in a sandbox. */
                int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                struct ifreq lo = {.ifr_name = "lo", .ifr_flags = IFF_UP};
                if (s < 0 || ioctl(s, SIOCSIFFLAGS, &lo) < 0)
                        _exit(5);
                int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port),
                                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                _exit(connect(t, (struct sockaddr *)&sin, sizeof sin) == 0 && write(t, "hi", 2) == 2 ? 0 : 6);
        }
        close(go[0]);
        close(rep[1]);
        char c = 0;
        if (read(rep[0], &c, 1) != 1) {
                int status = 0;
                (void)waitpid(pid, &status, 0);
                fail_msg("the test's namespace could not be made (wait status %d)", status);
        }
        int door = -1;
        int r = sandbox_door_listen(pid, port, 10000, &door);
        if (r < 0) {
                (void)kill(pid, SIGKILL);
                (void)waitpid(pid, NULL, 0);
                fail_msg("sandbox_door_listen: %s", strerror(-r));
        }
        /* Here, in our namespace, nothing listens on that port. */
        int here = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_not_equal(connect(here, (struct sockaddr *)&sin, sizeof sin), 0);
        close(here);
        assert_true(fcntl(door, F_GETFD) & FD_CLOEXEC);
        assert_int_equal(write(go[1], "g", 1), 1);
        int client = accept4(door, NULL, NULL, SOCK_CLOEXEC);
        assert_true(client >= 0);
        char buf[4] = {0};
        assert_int_equal(read(client, buf, 2), 2);
        assert_string_equal(buf, "hi");
        close(client);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        close(door);
        close(go[1]);
        close(rep[0]);
        /* A pid that is no sandbox of ours: an error, not a crash. */
        assert_true(sandbox_door_listen(1, port, 1000, &door) < 0);
        assert_true(sandbox_door_listen(0, port, 1000, &door) == -EINVAL);
        assert_no_children();
}

/* Limits are in place before the command runs, in every profile. */
static void test_limits(void **state) {
        (void)state;
        require_bwrap();
        enum sandbox_profile profiles[] = {SANDBOX_EVOLUTION, SANDBOX_LIVE};
        for (size_t k = 0; k < ARRAY_SIZE(profiles); k++) {
                _cleanup_free_ char *out = NULL;
                assert_int_equal(run_sh(profiles[k], "cat /proc/self/limits /proc/self/oom_score_adj", 30000, &out), 0);
                char want[128];
                snprintf(want, sizeof want, "Max processes             %-21d%-21d", SANDBOX_LIMIT_NPROC,
                         SANDBOX_LIMIT_NPROC);
                assert_non_null(strstr(out, want));
                assert_non_null(strstr(out, "Max core file size        0                    0 "));
                snprintf(want, sizeof want, "Max file size             %-21llu%-21llu", SANDBOX_LIMIT_FSIZE,
                         SANDBOX_LIMIT_FSIZE);
                assert_non_null(strstr(out, want));
                snprintf(want, sizeof want, "\n%d\n", SANDBOX_OOM_SCORE_ADJ);
                assert_non_null(strstr(out, want));
        }
        /* A file past the limit cannot be written (sparse: costs no memory). */
        _cleanup_free_ char *out = NULL;
        assert_int_equal(run_sh(SANDBOX_EVOLUTION,
                                "dd if=/dev/zero of=/tmp/small bs=1 count=1 seek=1048576 2>/dev/null && echo small-ok; "
                                "dd if=/dev/zero of=/tmp/big bs=1 count=1 seek=1073741824 2>/dev/null; echo big=$?",
                                30000, &out),
                         0);
        assert_non_null(strstr(out, "small-ok\n"));
        assert_null(strstr(out, "big=0\n"));
        /* The kernel itself keeps its own limit. */
        struct rlimit rl;
        assert_int_equal(getrlimit(RLIMIT_NPROC, &rl), 0);
        assert_true(rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > SANDBOX_LIMIT_NPROC);
}

/* A fork bomb stays within the sandbox's process limit, the host can still
 * start processes meanwhile, and stopping the sandbox leaves nothing. */
static void test_fork_bomb(void **state) {
        (void)state;
        require_probe();
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = policy(SANDBOX_EVOLUTION);
        /* The marker names this run: another run of this suite may be
         * exploding its own bomb on the same host. */
        char marker[64];
        snprintf(marker, sizeof marker, "seed-bomb-%d-", (int)getpid());
        char *cmd[] = {PROBE, "bomb", marker, NULL};
        struct sandbox_child c;
        assert_int_equal(sandbox_start(p, cmd, -1, &c), 0);
        int most = 0;
        int64_t deadline = now_ms() + 20000;
        while (now_ms() < deadline && most < SANDBOX_LIMIT_NPROC - 16) {
                int n = count_procs(marker);
                most = n > most ? n : most;
                struct timespec ts = {0, 50 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        /* Held there for a while; meanwhile the host starts processes. */
        for (int i = 0; i < 10; i++) {
                int n = count_procs(marker);
                most = n > most ? n : most;
        }
        struct proc_result res = {0};
        int r = proc_run(&(struct proc_opts){.argv = (char *const[]){"/bin/true", NULL}, .stdin_fd = -1,
                                             .out_fd = -1, .timeout_ms = 10000},
                         &res);
        (void)sandbox_signal(&c, SIGKILL);
        int code = proc_wait(c.pid, 30000);
        sandbox_child_done(&c);
        print_message("# at most %d processes of the bomb seen\n", most);
        assert_int_equal(r, 0);
        assert_int_equal(res.exit_code, 0);
        proc_result_done(&res);
        assert_true(code >= 0);
        assert_true(most > SANDBOX_LIMIT_NPROC / 2); /* it did explode */
        /* bwrap and the sandbox's pid 1 carry the marker too. */
        assert_true(most <= SANDBOX_LIMIT_NPROC + 2);
        deadline = now_ms() + 20000;
        while (count_procs(marker) > 0 && now_ms() < deadline) {
                struct timespec ts = {0, 50 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        assert_int_equal(count_procs(marker), 0);
        assert_no_children();
}

/* A timeout ends everything inside, even what left the session. */
static void test_timeout_kills_all(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = policy(SANDBOX_BUILD);
        /* Sleeps whose arguments name this run (see test_fork_bomb); fixed
         * width, so that no other run's is a prefix. */
        char marker[32], script[160];
        snprintf(marker, sizeof marker, "100.%07d", (int)getpid());
        snprintf(script, sizeof script, "sleep %s1 & sleep %s2 & setsid sleep %s3; wait", marker, marker, marker);
        char *cmd[] = {"/bin/sh", "-c", script, NULL};
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, cmd, 1500, &res), 0);
        assert_true(res.timed_out);
        proc_result_done(&res);
        int64_t deadline = now_ms() + 10000;
        while (count_procs(marker) > 0 && now_ms() < deadline) {
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        assert_int_equal(count_procs(marker), 0);
        assert_no_children();
}

/* The doctor names seccomp when that is what fails: here, in a child whose
 * own filter refuses to stack another (as a container without Seed's
 * profile might), namespaces still work. */
static void test_doctor_seccomp(void **state) {
        (void)state;
        require_bwrap();
#if defined(__x86_64__)
        int fds[2];
        assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct sock_filter f[] = {
                        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_seccomp, 3, 0),
                        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_prctl, 0, 3),
                        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
                        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_SECCOMP, 0, 1),
                        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
                        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                };
                struct sock_fprog prog = {.len = ARRAY_SIZE(f), .filter = f};
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
                    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
                        _exit(3);
                char *msg = NULL, *what = NULL, *fix = NULL;
                int r = sandbox_check(&msg);
                if (msg)
                        (void)!write(fds[1], msg, strlen(msg));
                /* `seed doctor`'s rows: namespaces pass, the filter is what fails, with a fix. */
                if (sandbox_check_bwrap(&what, &fix) != 0 || sandbox_check_userns(&what, &fix) != 0)
                        _exit(4);
                if (sandbox_check_seccomp(&what, &fix) >= 0 || !what || !fix || !strstr(what, "seccomp filter") ||
                    !strstr(fix, "seccomp"))
                        _exit(5);
                _exit(r < 0 ? 1 : 0);
        }
        close(fds[1]);
        char buf[2048];
        size_t len = 0;
        ssize_t n;
        while (len < sizeof buf - 1 && (n = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0)
                len += (size_t)n;
        buf[len] = 0;
        close(fds[0]);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 1);
        print_message("# doctor: %s\n", buf);
        assert_non_null(strstr(buf, "cannot load Seed's seccomp filter"));
        assert_non_null(strstr(buf, "Fix:"));
#else
        skip();
#endif
}

static void test_refuses_root_spec(void **state) {
        (void)state;
        /* The test runs unprivileged: root was dropped in main(). */
        assert_int_not_equal(geteuid(), 0);
}

int main(void) {
        setenv(CANARY_NAME, "leak", 1);
        /* Whatever started us may have leaked fds; the kernel does the same at boot. */
        close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
        int r = priv_drop_if_root(NULL);
        if (r < 0) {
                fprintf(stderr, "cannot drop root: %s\n", strerror(-r));
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_check),
                cmocka_unit_test(test_true),
                cmocka_unit_test(test_env_exact),
                cmocka_unit_test(test_workspace_writes),
                cmocka_unit_test(test_seed_hidden),
                cmocka_unit_test(test_backups_hidden),
                cmocka_unit_test(test_pg_socket_dir),
                cmocka_unit_test(test_host_dirs_absent),
                cmocka_unit_test(test_timeout_kills_group),
                cmocka_unit_test(test_output_capped),
                cmocka_unit_test(test_pid_namespace),
                cmocka_unit_test(test_no_leaked_fds),
                cmocka_unit_test(test_keep_fds),
                cmocka_unit_test(test_read_only),
                cmocka_unit_test(test_start_stop),
                cmocka_unit_test(test_seccomp_denies),
                cmocka_unit_test(test_seccomp_host_control),
                cmocka_unit_test(test_foreign_abi),
                cmocka_unit_test(test_ordinary_work),
                cmocka_unit_test(test_only_loopback),
                cmocka_unit_test(test_network_isolated),
                cmocka_unit_test(test_door_every_profile),
                cmocka_unit_test(test_no_dns),
                cmocka_unit_test(test_door_in_namespace),
                cmocka_unit_test(test_start_stress),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_fork_bomb),
                cmocka_unit_test(test_timeout_kills_all),
                cmocka_unit_test(test_doctor_seccomp),
                cmocka_unit_test(test_refuses_root_spec),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
#endif /* SANDBOX_PROBE */
