/* seccomp.h — the system-call filter loaded inside every sandbox.
 *
 * The filter is data: a table of rules, each naming one system call, the
 * argument pattern that makes it refused, the errno the call then fails
 * with, and why a sandbox never needs it. Everything not in the table is
 * allowed. A refused call fails (EPERM, or ENOSYS where libc must fall back
 * to an older call we can inspect); nothing is killed. System calls of a
 * foreign ABI (x86-32 or x32 on x86-64, arm32 on arm64) cannot be filtered
 * by argument the same way, so a process making one is killed.
 *
 * libseccomp is used here and nowhere else. The program is compiled once per
 * process; bwrap receives it through a sealed memfd (--seccomp FD). */
#pragma once

#include "base/base.h"

enum sandbox_sc_match {
        SANDBOX_SC_ALWAYS,  /* every call */
        SANDBOX_SC_EQ,      /* arg == value */
        SANDBOX_SC_EQ32,    /* (arg & 0xffffffff) == value: an int argument the
                             * kernel truncates (ioctl's request), so its upper
                             * bits must not let a call through */
        SANDBOX_SC_ANY_BIT, /* arg & value != 0 (one libseccomp rule per bit) */
        SANDBOX_SC_GT,      /* arg > value */
};

struct sandbox_sc_rule {
        const char *syscall;
        int err;                     /* errno the refused call fails with */
        enum sandbox_sc_match match;
        unsigned arg;                /* argument index the match inspects */
        uint64_t value;
        const char *why;
};

/* The table. Borrowed, static. */
const struct sandbox_sc_rule *sandbox_seccomp_rules(size_t *ret_n);

/* The compiled BPF program (struct sock_filter[], native arch), built on
 * first use and shared by every later call (thread-safe). *ret_data is
 * borrowed for the life of the process. Returns the build's result: -errno
 * if libseccomp could not compile the table. */
int sandbox_seccomp_program(const void **ret_data, size_t *ret_len);
/* Rules of the table that this libseccomp does not know (older than the
 * kernel's system call): skipped with a warning. 0 on a current system. */
size_t sandbox_seccomp_skipped(void);
/* A fresh, sealed, read-only memfd holding the program, positioned at 0,
 * O_CLOEXEC, for bwrap's --seccomp. Caller closes. */
int sandbox_seccomp_memfd(int *ret_fd);
