/* seccomp.c — the sandbox's system-call filter: a table compiled with
 * libseccomp into a BPF program once per process. */
#include "sandbox/seccomp.h"
#include "base/log.h"

#include <fcntl.h>
#include <linux/personality.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

/* Where clone() keeps its flags: the first argument, except on s390. */
#if defined(__s390__) || defined(__s390x__) || defined(__CRIS__)
#define CLONE_FLAGS_ARG 1
#else
#define CLONE_FLAGS_ARG 0
#endif

#define CLONE_NEW_ANY                                                                                          \
        ((uint64_t)(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |          \
                    CLONE_NEWPID | CLONE_NEWNET))

#define PROGRAM_MAX (256 * 1024) /* BPF caps a program at 4096 insns = 32 KiB */

#define DENY(name, why_) {.syscall = name, .err = EPERM, .match = SANDBOX_SC_ALWAYS, .why = why_}

static const struct sandbox_sc_rule rules[] = {
        /* Reaching into other processes. */
        DENY("ptrace", "debugs other processes: reads and writes their memory and registers"),
        DENY("process_vm_readv", "reads another process's memory"),
        DENY("process_vm_writev", "writes another process's memory"),
        DENY("pidfd_getfd", "copies another process's file descriptors"),
        DENY("process_madvise", "acts on another process's memory"),
        DENY("kcmp", "compares other processes' kernel objects (ptrace-class information)"),
        /* Large kernel attack surface no build needs. */
        DENY("io_uring_setup", "io_uring: a large attack surface that also bypasses per-call filtering"),
        DENY("io_uring_enter", "io_uring"),
        DENY("io_uring_register", "io_uring"),
        DENY("bpf", "loads programs into the kernel"),
        DENY("userfaultfd", "stalls kernel page faults, a classic exploit primitive"),
        DENY("perf_event_open", "kernel profiling, a frequent exploit vector"),
        DENY("keyctl", "kernel keyrings are not namespaced: keys of other sessions"),
        DENY("add_key", "kernel keyrings"),
        DENY("request_key", "kernel keyrings"),
        DENY("fanotify_init", "filesystem-wide event monitoring"),
        DENY("open_by_handle_at", "opens files by handle, around every path check (the 'shocker' escape)"),
        DENY("syslog", "reads the kernel log (addresses that defeat KASLR)"),
        /* Administration of the host. */
        DENY("kexec_load", "replaces the running kernel"),
        DENY("kexec_file_load", "replaces the running kernel"),
        DENY("init_module", "loads kernel modules"),
        DENY("finit_module", "loads kernel modules"),
        DENY("delete_module", "unloads kernel modules"),
        DENY("acct", "process accounting is host administration"),
        DENY("swapon", "swap is host administration"),
        DENY("swapoff", "swap is host administration"),
        DENY("reboot", "reboots the machine"),
        DENY("settimeofday", "sets the host's clock"),
        DENY("clock_settime", "sets the host's clock"),
        DENY("clock_adjtime", "adjusts the host's clock"),
        DENY("adjtimex", "adjusts the host's clock"),
        DENY("iopl", "raw I/O port access"),
        DENY("ioperm", "raw I/O port access"),
        DENY("quotactl", "disk quotas are host administration"),
        DENY("quotactl_fd", "disk quotas are host administration"),
        DENY("vhangup", "hangs up the terminal"),
        DENY("uselib", "obsolete a.out loader"),
        /* Namespaces and mounts: bwrap has set them up; the sandbox keeps them. */
        DENY("mount", "mounting over the sandbox's view"),
        DENY("umount2", "unmounting what hides the kernel's files"),
        DENY("pivot_root", "changes the root"),
        DENY("move_mount", "new mount API"),
        DENY("open_tree", "new mount API: clones mount trees"),
        DENY("fsopen", "new mount API"),
        DENY("fsconfig", "new mount API"),
        DENY("fsmount", "new mount API"),
        DENY("fspick", "new mount API"),
        DENY("mount_setattr", "changes mount flags (e.g. read-only)"),
        DENY("unshare", "new namespaces: the sandbox's are final"),
        DENY("setns", "joins other namespaces"),
        {.syscall = "clone", .err = EPERM, .match = SANDBOX_SC_ANY_BIT, .arg = CLONE_FLAGS_ARG,
         .value = CLONE_NEW_ANY, .why = "a process in new namespaces (CLONE_NEW*); plain fork and threads pass"},
        {.syscall = "clone3", .err = ENOSYS, .match = SANDBOX_SC_ALWAYS,
         .why = "its flags are behind a pointer; ENOSYS makes libc fall back to clone, which is inspected"},
        /* Ways out that no namespace covers. */
        {.syscall = "socket", .err = EPERM, .match = SANDBOX_SC_EQ, .arg = 0, .value = AF_VSOCK,
         .why = "virtio-vsock reaches the hypervisor or host outside any network namespace"},
        {.syscall = "ioctl", .err = EPERM, .match = SANDBOX_SC_EQ32, .arg = 1, .value = TIOCSTI,
         .why = "TIOCSTI pushes input into a terminal: commands typed into the owner's shell"},
        {.syscall = "ioctl", .err = EPERM, .match = SANDBOX_SC_EQ32, .arg = 1, .value = TIOCLINUX,
         .why = "TIOCLINUX controls the console and can inject input too"},
        /* personality: only PER_LINUX (0) and PER_LINUX32 (8); no flags such
         * as ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC (nor the 0xffffffff query,
         * which libseccomp cannot single out without a deny-by-default rule). */
        {.syscall = "personality", .err = EPERM, .match = SANDBOX_SC_GT, .arg = 0, .value = PER_LINUX32,
         .why = "personality flags weaken the process (ASLR off, executable data)"},
        {.syscall = "personality", .err = EPERM, .match = SANDBOX_SC_ANY_BIT, .arg = 0, .value = 0x7,
         .why = "personalities other than PER_LINUX and PER_LINUX32"},
};

const struct sandbox_sc_rule *sandbox_seccomp_rules(size_t *ret_n) {
        *ret_n = ARRAY_SIZE(rules);
        return rules;
}

/* The program, built once. */
static pthread_once_t program_once = PTHREAD_ONCE_INIT;
static int program_result = -EAGAIN;
static void *program_data;
static size_t program_len, program_skipped;

static int add_rule(scmp_filter_ctx ctx, const struct sandbox_sc_rule *r, int nr) {
        uint32_t action = SCMP_ACT_ERRNO((uint32_t)r->err);
        switch (r->match) {
        case SANDBOX_SC_ALWAYS:
                return seccomp_rule_add(ctx, action, nr, 0);
        case SANDBOX_SC_EQ:
                return seccomp_rule_add(ctx, action, nr, 1, SCMP_CMP(r->arg, SCMP_CMP_EQ, r->value));
        case SANDBOX_SC_EQ32:
                return seccomp_rule_add(ctx, action, nr, 1,
                                        SCMP_CMP(r->arg, SCMP_CMP_MASKED_EQ, 0xffffffffULL, r->value));
        case SANDBOX_SC_GT:
                return seccomp_rule_add(ctx, action, nr, 1, SCMP_CMP(r->arg, SCMP_CMP_GT, r->value));
        case SANDBOX_SC_ANY_BIT:
                /* Rules are alternatives: one per bit is "any bit set". */
                for (unsigned b = 0; b < 64; b++) {
                        uint64_t bit = 1ULL << b;
                        if (!(r->value & bit))
                                continue;
                        int k = seccomp_rule_add(ctx, action, nr, 1, SCMP_CMP(r->arg, SCMP_CMP_MASKED_EQ, bit, bit));
                        if (k < 0)
                                return k;
                }
                return 0;
        }
        return -EINVAL;
}

static int compile(scmp_filter_ctx ctx, size_t *ret_skipped) {
        size_t skipped = 0;
        /* Foreign ABIs are not in the filter: their calls kill the process.
         * Non-fatal if this libseccomp lacks the attribute. */
        (void)seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2); /* binary tree: every call pays log(n) */
        for (size_t i = 0; i < ARRAY_SIZE(rules); i++) {
                const struct sandbox_sc_rule *r = &rules[i];
                int nr = seccomp_syscall_resolve_name(r->syscall);
                if (nr == __NR_SCMP_ERROR) {
                        log_warn("sandbox: libseccomp does not know %s(); not filtered", r->syscall);
                        skipped++;
                        continue;
                }
                int k = add_rule(ctx, r, nr);
                if (k < 0)
                        return log_error_errno(k, "sandbox: seccomp rule for %s() rejected: %m", r->syscall);
        }
        *ret_skipped = skipped;
        return 0;
}

static int read_all(int fd, size_t max, void **ret, size_t *ret_len) {
        off_t size = lseek(fd, 0, SEEK_END);
        if (size < 0)
                return -errno;
        if (size == 0 || (size_t)size > max || size % 8 != 0)
                return -EBADMSG;
        _cleanup_free_ char *data = malloc((size_t)size);
        if (!data)
                return -ENOMEM;
        size_t got = 0;
        while (got < (size_t)size) {
                ssize_t n = pread(fd, data + got, (size_t)size - got, (off_t)got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                got += (size_t)n;
        }
        *ret = TAKE_PTR(data);
        *ret_len = got;
        return 0;
}

static void build_program(void) {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx) {
                program_result = log_error_errno(-ENOMEM, "sandbox: libseccomp cannot create a filter");
                return;
        }
        _cleanup_close_ int fd = memfd_create("seed-seccomp-build", MFD_CLOEXEC);
        int r = fd < 0 ? -errno : compile(ctx, &program_skipped);
        if (r >= 0 && (r = seccomp_export_bpf(ctx, fd)) < 0)
                log_error_errno(r, "sandbox: libseccomp cannot export the filter: %m");
        if (r >= 0 && (r = read_all(fd, PROGRAM_MAX, &program_data, &program_len)) < 0)
                log_error_errno(r, "sandbox: the exported seccomp filter is unusable: %m");
        seccomp_release(ctx);
        program_result = r < 0 ? r : 0;
}

int sandbox_seccomp_program(const void **ret_data, size_t *ret_len) {
        pthread_once(&program_once, build_program);
        if (program_result < 0)
                return program_result;
        *ret_data = program_data;
        *ret_len = program_len;
        return 0;
}

size_t sandbox_seccomp_skipped(void) {
        pthread_once(&program_once, build_program);
        return program_skipped;
}

int sandbox_seccomp_memfd(int *ret_fd) {
        const void *data;
        size_t len;
        int r = sandbox_seccomp_program(&data, &len);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = memfd_create("seed-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        const char *s = data;
        size_t left = len;
        while (left > 0) {
                ssize_t k = write(fd, s, left);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EIO;
                s += k;
                left -= (size_t)k;
        }
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}
