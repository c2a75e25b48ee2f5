/* sandbox-driver — times one way of running /usr/bin/true, for bench/sandbox.
 *
 *   sandbox-driver MODE RUNS
 *
 * MODE is one of
 *   evolution  sandbox_run() under the EVOLUTION profile: seccomp, limits,
 *              its own network namespace with a door to the egress proxy;
 *   live       sandbox_run() under the LIVE profile: the same, the live
 *              organism's mounts;
 *   bwrap      bwrap alone with the EVOLUTION policy's mounts and namespaces
 *              (sandbox_policy_argv without fds: no seccomp, no block-fd
 *              handshake, no limits, no door);
 *   exec       fork, exec and wait of /usr/bin/true, nothing else.
 * Prints one line per run: its wall time in milliseconds. One unmeasured
 * run comes first. Drops root like the kernel does (sandboxes never run as
 * host uid 0). */
#include "base/fileio.h"
#include "base/priv.h"
#include "base/proc.h"
#include "sandbox/sandbox.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

static char *const true_cmd[] = {"/usr/bin/true", NULL};

static double now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int run_sandbox(const struct sandbox_policy *p) {
        struct proc_result res = {0};
        int r = sandbox_run(p, true_cmd, 30000, &res);
        if (r >= 0 && res.exit_code != 0) {
                fprintf(stderr, "sandboxed true failed (%d): %s\n", res.exit_code, res.output ? res.output : "");
                r = -EIO;
        }
        proc_result_done(&res);
        return r;
}

/* bwrap with the policy's options on its command line, as the policy's
 * data files (the Node.js shim) need: one memfd each, read once by bwrap. */
static int run_bwrap(const struct sandbox_policy *p) {
        struct sandbox_fds fds = SANDBOX_FDS_NONE;
        int keep[SANDBOX_DATA_MAX], r = 0;
        size_t n = 0;
        for (size_t i = 0; i < p->n_ops && n < SANDBOX_DATA_MAX; i++) {
                if (p->ops[i].kind != SB_RO_BIND_DATA)
                        continue;
                int fd = memfd_create("bench-data", MFD_CLOEXEC);
                size_t len = strlen(p->ops[i].src);
                if (fd < 0 || write(fd, p->ops[i].src, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) < 0) {
                        r = -errno;
                        if (fd >= 0)
                                close(fd);
                        goto out;
                }
                fds.data[n] = keep[n] = fd;
                n++;
        }
        char **argv = NULL;
        if ((r = sandbox_policy_argv(p, sandbox_bwrap_path(), &fds, true_cmd, &argv)) < 0)
                goto out;
        struct proc_result res = {0};
        r = proc_run(&(struct proc_opts){.argv = argv, .stdin_fd = -1, .out_fd = -1, .keep_fds = keep,
                                         .n_keep_fds = n, .timeout_ms = 30000},
                     &res);
        if (r >= 0 && res.exit_code != 0) {
                fprintf(stderr, "bwrap failed (%d): %s\n", res.exit_code, res.output ? res.output : "");
                r = -EIO;
        }
        proc_result_done(&res);
        strv_free(argv);
out:
        for (size_t i = 0; i < n; i++)
                close(keep[i]);
        return r;
}

/* The floor: fork, exec, wait; nothing else. */
static int run_exec(void) {
        static char *const empty_env[] = {NULL};
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                execve(true_cmd[0], true_cmd, empty_env);
                _exit(127);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid)
                return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

int main(int argc, char **argv) {
        if (argc != 3 || atoi(argv[2]) <= 0) {
                fprintf(stderr, "usage: %s evolution|live|bwrap|exec RUNS\n", argv[0]);
                return 2;
        }
        const char *mode = argv[1];
        int runs = atoi(argv[2]);
        int r = priv_drop_if_root(NULL);
        if (r < 0) {
                fprintf(stderr, "cannot drop root: %s\n", strerror(-r));
                return 1;
        }
        char root[] = "/tmp/bench-sandbox.XXXXXX";
        if (!mkdtemp(root)) {
                perror("mkdtemp");
                return 1;
        }
        char organism[sizeof root + 16];
        snprintf(organism, sizeof organism, "%s/organism", root);
        (void)mkdir_p(organism, 0755);
        bool live = streq(mode, "live");
        char *const evolvable[] = {"organism/", NULL};
        struct egress *egress = NULL;
        if ((r = egress_new(&(struct egress_config){0}, &egress)) < 0) {
                fprintf(stderr, "egress: %s\n", strerror(-r));
                rm_rf(root);
                return 1;
        }
        struct sandbox_spec spec = {
                .profile = live ? SANDBOX_LIVE : SANDBOX_EVOLUTION,
                .seed_dir = root,
                .workspace = root,
                .evolvable = evolvable,
                .workspace_readonly = live,
                .egress = egress,
        };
        struct sandbox_policy *p = NULL;
        if ((r = sandbox_policy_build(&spec, &p)) < 0) {
                fprintf(stderr, "policy: %s\n", strerror(-r));
                goto out;
        }
        for (int i = 0; i <= runs && r >= 0; i++) {
                double t0 = now_us();
                if (streq(mode, "evolution") || live)
                        r = run_sandbox(p);
                else if (streq(mode, "bwrap"))
                        r = run_bwrap(p);
                else if (streq(mode, "exec"))
                        r = run_exec();
                else
                        r = -EINVAL;
                double dt = now_us() - t0;
                if (r >= 0 && i > 0) /* the first run warms caches */
                        printf("%.3f\n", dt / 1000.0);
        }
        if (r < 0)
                fprintf(stderr, "%s: %s\n", mode, strerror(-r));
out:
        sandbox_policy_free(p);
        egress_free(egress);
        rm_rf(root);
        return r < 0 ? 1 : 0;
}
