/* check.c — the start-up checks: can sandboxes run on this host? Each check
 * says what is wrong and how to fix it, apart: the kernel's start-up joins
 * them into one message (sandbox_check), `seed doctor` shows each check as
 * a row of its own. */
#include "sandbox/sandbox.h"
#include "base/fileio.h"
#include "base/log.h"
#include "sandbox/seccomp.h"

#include <stdarg.h>

/* Fills *ret_what (formatted) and *ret_fix (a copy of fix) and returns r. */
_printf_(5, 6) static int fail(int r, char **ret_what, char **ret_fix, const char *fix, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *what = NULL;
        if (vasprintf(&what, fmt, ap) < 0)
                what = NULL;
        va_end(ap);
        char *f = strdup(fix);
        if (!what || !f) {
                free(what);
                free(f);
                return -ENOMEM;
        }
        *ret_what = what;
        *ret_fix = f;
        return r;
}

/* Reads a small integer sysctl; -1 when absent or unreadable. */
static long sysctl_long(const char *path) {
        _cleanup_free_ char *s = NULL;
        if (read_file(path, 64, &s, NULL) < 0)
                return -1;
        char *end;
        long v = strtol(s, &end, 10);
        return end == s ? -1 : v;
}

/* The first line of bwrap's complaint, bounded, for the message. */
static char *first_line(const char *out) {
        if (!out)
                return strdup("");
        size_t n = strcspn(out, "\n");
        if (n > 300)
                n = 300;
        return strndup(out, n);
}

/* Runs /usr/bin/true in a throw-away sandbox, with Seed's seccomp filter or
 * without. 0 if it ran, 1 with *ret_why (bwrap's complaint) if not, -errno if
 * bwrap could not be started at all. */
static int probe_bwrap(const char *bwrap, bool with_seccomp, char **ret_why) {
        _cleanup_close_ int sfd = -1;
        if (with_seccomp) {
                int r = sandbox_seccomp_memfd(&sfd);
                if (r < 0)
                        return r;
        }
        static const char *const base[] = {
                "--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-net", "--disable-userns", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                "--tmpfs", "/tmp",
        };
        _cleanup_strv_free_ char **argv = NULL;
        if (strv_push(&argv, bwrap) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < ARRAY_SIZE(base); i++)
                if (strv_push(&argv, base[i]) < 0)
                        return -ENOMEM;
        if (with_seccomp && (strv_push(&argv, "--seccomp") < 0 || strv_pushf(&argv, "%d", sfd) < 0))
                return -ENOMEM;
        if (strv_push(&argv, "--") < 0 || strv_push(&argv, "/usr/bin/true") < 0)
                return -ENOMEM;
        struct proc_result res = {0};
        int r = proc_run(&(struct proc_opts){.argv = argv, .stdin_fd = -1, .out_fd = -1, .timeout_ms = 20000,
                                             .keep_fds = &sfd, .n_keep_fds = with_seccomp ? 1 : 0,
                                             .out_head = 4096, .out_tail = 1},
                         &res);
        if (r < 0)
                return r;
        bool ok = res.exit_code == 0 && !res.timed_out;
        char *why = ok ? NULL : first_line(res.output);
        proc_result_done(&res);
        if (ok)
                return 0;
        if (!why)
                return -ENOMEM;
        *ret_why = why;
        return 1;
}

int sandbox_check_bwrap(char **ret_what, char **ret_fix) {
        if (sandbox_bwrap_path())
                return 0;
        return fail(-ENOENT, ret_what, ret_fix, "'sudo apt-get install bubblewrap' (scripts/bootstrap does).",
                    "bubblewrap is not installed (%s is missing), and Seed runs every command in a bubblewrap "
                    "sandbox.",
                    SANDBOX_BWRAP_PATH);
}

static int refuse_root(char **ret_what, char **ret_fix) {
        return fail(-EPERM, ret_what, ret_fix,
                    "start the Seed as an unprivileged user (the seed CLI drops to the '" "seed" "' account).",
                    "this runs as root, and sandboxes never run as host uid 0.");
}

/* Why bwrap cannot create a sandbox (why: its complaint), and the fix. */
static int userns_refused(const char *bwrap, const char *why, char **ret_what, char **ret_fix) {
        if (sysctl_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1)
                return fail(-EPERM, ret_what, ret_fix,
                            "'sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0' (or install an "
                            "AppArmor profile for bwrap that allows userns).",
                            "bubblewrap cannot create a sandbox (%s): AppArmor restricts unprivileged user "
                            "namespaces on this host.",
                            why);
        if (sysctl_long("/proc/sys/kernel/unprivileged_userns_clone") == 0)
                return fail(-EPERM, ret_what, ret_fix, "'sudo sysctl -w kernel.unprivileged_userns_clone=1'.",
                            "bubblewrap cannot create a sandbox (%s): unprivileged user namespaces are disabled.",
                            why);
        if (sysctl_long("/proc/sys/user/max_user_namespaces") == 0)
                return fail(-EPERM, ret_what, ret_fix, "'sudo sysctl -w user.max_user_namespaces=15000'.",
                            "bubblewrap cannot create a sandbox (%s): user namespaces are disabled "
                            "(user.max_user_namespaces=0).",
                            why);
        if (path_exists("/.dockerenv") || path_exists("/run/.containerenv"))
                return fail(-EPERM, ret_what, ret_fix,
                            "run the container with Seed's seccomp profile (seccomp.json) and AppArmor relaxed "
                            "('--security-opt seccomp=seccomp.json --security-opt apparmor=unconfined "
                            "--security-opt systempaths=unconfined'), or use 'seed run' with the container driver.",
                            "bubblewrap cannot create a sandbox (%s): this container forbids namespaces.", why);
        return fail(-EPERM, ret_what, ret_fix,
                    "make unprivileged user namespaces available: check 'sysctl "
                    "kernel.apparmor_restrict_unprivileged_userns kernel.unprivileged_userns_clone "
                    "user.max_user_namespaces'.",
                    "bubblewrap (%s) cannot create a sandbox here (%s).", bwrap, why);
}

int sandbox_check_userns(char **ret_what, char **ret_fix) {
        const char *bwrap = sandbox_bwrap_path();
        if (!bwrap)
                return sandbox_check_bwrap(ret_what, ret_fix);
        if (geteuid() == 0)
                return refuse_root(ret_what, ret_fix);
        _cleanup_free_ char *why = NULL;
        int r = probe_bwrap(bwrap, false, &why);
        if (r < 0)
                return fail(r, ret_what, ret_fix, "reinstall bubblewrap ('sudo apt-get install --reinstall bubblewrap').",
                            "cannot run %s: %s", bwrap, strerror(-r));
        return r == 0 ? 0 : userns_refused(bwrap, why, ret_what, ret_fix);
}

static int seccomp_refused(const char *why, char **ret_what, char **ret_fix) {
        return fail(-EPERM, ret_what, ret_fix,
                    "use a kernel with seccomp filters (CONFIG_SECCOMP_FILTER); in a container, run it with "
                    "Seed's seccomp profile ('--security-opt seccomp=seccomp.json'), which allows seccomp(2).",
                    "bubblewrap cannot load Seed's seccomp filter (%s), and no sandbox starts without it.", why);
}

/* The filter itself: libseccomp must compile it. */
static int seccomp_program(char **ret_what, char **ret_fix) {
        const void *prog;
        size_t prog_len;
        int r = sandbox_seccomp_program(&prog, &prog_len);
        if (r < 0)
                return fail(r, ret_what, ret_fix,
                            "install a current libseccomp ('sudo apt-get install libseccomp2') and rebuild the "
                            "kernel.",
                            "libseccomp cannot build Seed's system-call filter (%s), and no sandbox starts "
                            "without it.",
                            strerror(-r));
        return 0;
}

int sandbox_check_seccomp(char **ret_what, char **ret_fix) {
        const char *bwrap = sandbox_bwrap_path();
        if (!bwrap)
                return sandbox_check_bwrap(ret_what, ret_fix);
        if (geteuid() == 0)
                return refuse_root(ret_what, ret_fix);
        int r = seccomp_program(ret_what, ret_fix);
        if (r < 0)
                return r;
        _cleanup_free_ char *why = NULL;
        r = probe_bwrap(bwrap, true, &why);
        if (r < 0)
                return fail(r, ret_what, ret_fix, "reinstall bubblewrap ('sudo apt-get install --reinstall bubblewrap').",
                            "cannot run %s: %s", bwrap, strerror(-r));
        if (r == 0)
                return 0;
        /* Without namespaces the filter is not what fails. */
        _cleanup_free_ char *why_plain = NULL;
        if (probe_bwrap(bwrap, false, &why_plain) != 0)
                return fail(-EPERM, ret_what, ret_fix, "see the user namespaces check.",
                            "not tested: bubblewrap cannot create a sandbox at all (%s).", why);
        return seccomp_refused(why, ret_what, ret_fix);
}

/* "what Fix: fix" as one message. */
static int joined(int r, char *what, char *fix, char **ret_message) {
        int k = ret_message && what && fix ? xasprintf(ret_message, "%s Fix: %s", what, fix) : 0;
        free(what);
        free(fix);
        return k < 0 ? -ENOMEM : r;
}

int sandbox_check(char **ret_message) {
        char *what = NULL, *fix = NULL;
        const char *bwrap = sandbox_bwrap_path();
        int r = sandbox_check_bwrap(&what, &fix);
        if (r == 0 && geteuid() == 0)
                r = refuse_root(&what, &fix);
        if (r == 0)
                r = seccomp_program(&what, &fix);
        if (r < 0)
                return joined(r, what, fix, ret_message);
        /* One probe when all is well; the others only to say what is not. */
        _cleanup_free_ char *why = NULL;
        r = probe_bwrap(bwrap, true, &why);
        if (r < 0)
                return errorf(r, ret_message, "cannot run %s: %s", bwrap, strerror(-r));
        if (r == 0)
                return 0;
        _cleanup_free_ char *why_plain = NULL;
        r = probe_bwrap(bwrap, false, &why_plain);
        if (r == 0)
                r = seccomp_refused(why, &what, &fix);
        else
                r = userns_refused(bwrap, why, &what, &fix);
        return joined(r, what, fix, ret_message);
}
