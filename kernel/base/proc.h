/* proc.h — starting child processes: each in its own process group, with an
 * explicit environment, only the fds passed on purpose, output captured
 * head+tail or sent to a file, and a timeout that kills the whole group. */
#pragma once

#include "base/base.h"
#include <sys/types.h>

struct proc_opts {
        char *const *argv;     /* argv[0] is a path; required */
        char *const *envp;     /* the whole environment; NULL = empty */
        const char *cwd;       /* NULL = inherit */
        int stdin_fd;          /* -1 = /dev/null */
        int out_fd;            /* >= 0: stdout+stderr go there; -1: captured (proc_run) */
        const int *keep_fds;   /* fds the child keeps at the same numbers */
        size_t n_keep_fds;
        int timeout_ms;        /* proc_run only; 0 = none */
        size_t out_head, out_tail; /* capture caps; 0,0 = 1 MiB + 1 MiB */
};

struct proc_result {
        int exit_code;   /* 0-255, or 128+signal */
        bool timed_out;
        char *output;    /* merged stdout+stderr, head+tail; caller frees */
};

/* Runs to completion. Returns 0 if it ran (see exit_code), -errno if it could
 * not start. The caller frees ret->output. */
int proc_run(const struct proc_opts *o, struct proc_result *ret);
/* Starts in a new session/process group and returns its pid. */
int proc_spawn(const struct proc_opts *o, pid_t *ret_pid);
/* Signals the whole process group led by pid. */
int proc_kill_group(pid_t pid, int sig);
/* waitpid() with a deadline; returns the exit code as above, -ETIMEDOUT. */
int proc_wait(pid_t pid, int timeout_ms);
void proc_result_done(struct proc_result *r);
/* Decodes a wait status into 0-255 or 128+signal. */
int proc_exit_code(int status);
