#include "base/proc.h"
#include "base/fileio.h"
#include "base/buf.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

int proc_exit_code(int status) {
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return 255;
}

/* For kernels without CLOSE_RANGE_CLOEXEC (before 5.11): every possible fd
 * from lo up. Async-signal-safe. */
static int mark_cloexec_from(int lo) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return -1;
        rlim_t hi = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 20) ? (1u << 20) : rl.rlim_cur;
        for (rlim_t fd = (rlim_t)lo; fd < hi; fd++) {
                int fl = fcntl((int)fd, F_GETFD);
                if (fl >= 0 && !(fl & FD_CLOEXEC) && fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC) < 0)
                        return -1;
        }
        return 0;
}

/* In the child, between fork and exec: async-signal-safe calls only. */
static _Noreturn void child_exec(const struct proc_opts *o, int out_fd) {
        static char *const empty_env[] = {NULL};
        if (setsid() < 0)
                _exit(127);
        int in = o->stdin_fd >= 0 ? o->stdin_fd : open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in < 0 || dup2(in, STDIN_FILENO) < 0)
                _exit(127);
        if (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(out_fd, STDERR_FILENO) < 0)
                _exit(127);
        /* Only the fds passed on purpose survive exec, whatever we inherited. */
        if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0 &&
            ((errno != EINVAL && errno != ENOSYS) || mark_cloexec_from(3) < 0))
                _exit(127);
        for (size_t i = 0; i < o->n_keep_fds; i++) {
                int fl = fcntl(o->keep_fds[i], F_GETFD);
                if (fl < 0 || fcntl(o->keep_fds[i], F_SETFD, fl & ~FD_CLOEXEC) < 0)
                        _exit(127);
        }
        if (o->cwd && chdir(o->cwd) < 0)
                _exit(127);
        sigset_t all;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        signal(SIGPIPE, SIG_DFL);
        execve(o->argv[0], o->argv, o->envp ? o->envp : empty_env);
        _exit(127);
}

int proc_spawn(const struct proc_opts *o, pid_t *ret_pid) {
        if (!o->argv || !o->argv[0])
                return -EINVAL;
        int out = o->out_fd >= 0 ? o->out_fd : open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (out < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                if (o->out_fd < 0)
                        close(out);
                return r;
        }
        if (pid == 0)
                child_exec(o, out);
        if (o->out_fd < 0)
                close(out);
        /* No setpgid() here: if it ran before the child's setsid(), the child
         * would already lead a process group and setsid() would fail, leaving
         * it in our session. Until setsid() runs the child has no children,
         * so proc_kill_group()'s fallback to the pid alone covers that window. */
        *ret_pid = pid;
        return 0;
}

int proc_kill_group(pid_t pid, int sig) {
        if (pid <= 1)
                return -EINVAL;
        if (kill(-pid, sig) < 0 && kill(pid, sig) < 0)
                return -errno;
        return 0;
}

int proc_wait(pid_t pid, int timeout_ms) {
        int64_t deadline = now_ms() + timeout_ms;
        for (;;) {
                int status;
                pid_t k = waitpid(pid, &status, timeout_ms < 0 ? 0 : WNOHANG);
                if (k == pid)
                        return proc_exit_code(status);
                if (k < 0 && errno != EINTR)
                        return -errno;
                if (timeout_ms >= 0 && now_ms() >= deadline)
                        return -ETIMEDOUT;
                if (k == 0) {
                        struct timespec ts = {0, 10 * 1000 * 1000};
                        nanosleep(&ts, NULL);
                }
        }
}

int proc_run(const struct proc_opts *o, struct proc_result *ret) {
        struct proc_opts copy = *o;
        int pipefd[2] = {-1, -1};
        bool capture = o->out_fd < 0;
        if (capture) {
                if (pipe2(pipefd, O_CLOEXEC) < 0)
                        return -errno;
                copy.out_fd = pipefd[1];
        }
        pid_t pid;
        int r = proc_spawn(&copy, &pid);
        if (capture)
                close(pipefd[1]);
        if (r < 0) {
                if (capture)
                        close(pipefd[0]);
                return r;
        }

        struct headtail ht;
        size_t head = o->out_head, tail = o->out_tail;
        if (!head && !tail)
                head = tail = 1024 * 1024;
        r = headtail_init(&ht, head, tail);
        bool timed_out = false;
        int64_t deadline = o->timeout_ms > 0 ? now_ms() + o->timeout_ms : INT64_MAX;
        if (capture && r == 0 && headtail_read_fd(&ht, pipefd[0], deadline) == -ETIMEDOUT) {
                timed_out = true;
                proc_kill_group(pid, SIGKILL);
        }
        if (capture)
                close(pipefd[0]);

        int64_t left = deadline == INT64_MAX ? -1 : deadline - now_ms();
        int code = proc_wait(pid, left < 0 && deadline != INT64_MAX ? 0 : (int)left);
        if (code == -ETIMEDOUT) {
                timed_out = true;
                proc_kill_group(pid, SIGKILL);
                code = proc_wait(pid, -1);
        }
        /* Kill stragglers the child left in its group. The child is reaped, so
         * only the group may be signalled: its pid alone may be reused by now
         * (a live group keeps its id from being reused). */
        (void)kill(-pid, SIGKILL);

        *ret = (struct proc_result){.exit_code = code < 0 ? 255 : code, .timed_out = timed_out};
        if (capture) {
                ret->output = headtail_render(&ht);
        }
        headtail_free(&ht);
        return 0;
}

void proc_result_done(struct proc_result *r) {
        free(r->output);
        r->output = NULL;
}
