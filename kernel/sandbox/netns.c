/* netns.c — slirp4netns for the sandboxes that need outbound network, and
 * the resolv.conf they see. */
#include "sandbox/netns.h"
#include "base/buf.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/proc.h"
#include "sandbox/reap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/nsfs.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define RESOLV_MAX (64 * 1024)
#define TUN_PATH "/dev/net/tun"

/* The sandbox's side of slirp's network (its defaults, cidr 10.0.2.0/24). */
#define SLIRP_TAP "tap0"
#define SLIRP_MTU 65520
#define SLIRP_GUEST "10.0.2.100"
#define SLIRP_NETMASK "255.255.255.0"
#define SLIRP_GATEWAY "10.0.2.2"

const char *sandbox_slirp_path(void) {
        return access(SANDBOX_SLIRP_PATH, X_OK) == 0 ? SANDBOX_SLIRP_PATH : NULL;
}

int sandbox_check_network(char **ret_message) {
        const char *why = NULL;
        int r = 0;
        if (!sandbox_slirp_path()) {
                r = -ENOENT;
                why = "slirp4netns is not installed (" SANDBOX_SLIRP_PATH " is missing): evolution, build and "
                      "test sandboxes run without any network, so installing dependencies fails. Fix: 'sudo "
                      "apt-get install slirp4netns'.";
        } else if (access(TUN_PATH, R_OK | W_OK) < 0) {
                r = -errno;
                if (r == -ENOENT || r == -ENODEV || r == -ENXIO)
                        why = TUN_PATH " does not exist, so slirp4netns cannot connect sandboxes: evolution, "
                              "build and test sandboxes run without any network. Fix: load the tun module "
                              "('sudo modprobe tun'), or give the container the device ('--device "
                              "/dev/net/tun').";
                else
                        why = TUN_PATH " exists but this account may not open it (its mode is probably 0600, "
                              "root only; Debian's own is 0666), so slirp4netns cannot connect sandboxes: "
                              "evolution, build and test sandboxes run without any network. Fix: 'sudo chmod "
                              "0666 /dev/net/tun' (a udev rule or your container runtime can make it last).";
        }
        if (r < 0 && ret_message)
                *ret_message = strdup(why);
        return r;
}

/* Waits for slirp4netns's "1" on its ready fd. */
static int wait_ready(int fd, int timeout_ms) {
        int64_t deadline = now_ms() + timeout_ms;
        for (;;) {
                int r = fd_wait_readable(fd, deadline);
                if (r < 0)
                        return r;
                char c;
                ssize_t n = read(fd, &c, 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                return n == 1 && c == '1' ? 0 : -EIO; /* EOF: it failed */
        }
}

static void net_end(pid_t pid) {
        (void)kill(pid, SIGKILL); /* nothing of it is worth a clean exit */
        (void)sandbox_reap(pid, -1);
}

/* What tap_configure() does inside the namespace, prepared beforehand so
 * that the forked child only makes system calls. */
struct tap_setup {
        struct ifreq up, mtu, addr, mask;
        struct rtentry route;
};

static void tap_setup_init(struct tap_setup *t) {
        *t = (struct tap_setup){0};
        struct ifreq *all[] = {&t->up, &t->mtu, &t->addr, &t->mask};
        for (size_t i = 0; i < ARRAY_SIZE(all); i++)
                memcpy(all[i]->ifr_name, SLIRP_TAP, sizeof SLIRP_TAP);
        /* The flags slirp4netns --configure sets. */
        t->up.ifr_flags = IFF_UP | IFF_RUNNING;
        t->mtu.ifr_mtu = SLIRP_MTU;
        struct sockaddr_in *a = (struct sockaddr_in *)&t->addr.ifr_addr;
        a->sin_family = AF_INET;
        (void)inet_pton(AF_INET, SLIRP_GUEST, &a->sin_addr);
        a = (struct sockaddr_in *)&t->mask.ifr_netmask;
        a->sin_family = AF_INET;
        (void)inet_pton(AF_INET, SLIRP_NETMASK, &a->sin_addr);
        /* Default route (destination and mask 0.0.0.0) via the gateway. */
        ((struct sockaddr_in *)&t->route.rt_dst)->sin_family = AF_INET;
        ((struct sockaddr_in *)&t->route.rt_genmask)->sin_family = AF_INET;
        a = (struct sockaddr_in *)&t->route.rt_gateway;
        a->sin_family = AF_INET;
        (void)inet_pton(AF_INET, SLIRP_GATEWAY, &a->sin_addr);
        t->route.rt_flags = RTF_UP | RTF_GATEWAY;
        t->route.rt_dev = (char *)SLIRP_TAP;
}

/* The steps of tap_child(), for the message when one fails. */
static const char *const tap_steps[] = {
        "join the sandbox's user namespace",
        "join its network namespace",
        "open a socket there",
        "bring " SLIRP_TAP " up",
        "set the MTU of " SLIRP_TAP,
        "set the address of " SLIRP_TAP,
        "set the netmask of " SLIRP_TAP,
        "add the default route via " SLIRP_GATEWAY,
};

/* In a forked child of a threaded process: system calls only. Reports the
 * failed step (an index into tap_steps) and its errno on report_fd. */
static _Noreturn void tap_child(int userns, int netns, struct tap_setup *t, int report_fd) {
        const struct {
                unsigned long request;
                void *arg;
        } ioctls[] = {
                {SIOCSIFFLAGS, &t->up},     {SIOCSIFMTU, &t->mtu},  {SIOCSIFADDR, &t->addr},
                {SIOCSIFNETMASK, &t->mask}, {SIOCADDRT, &t->route},
        };
        int report[2] = {0, 0}, s;
        if (setns(userns, CLONE_NEWUSER) < 0)
                goto fail;
        report[0]++;
        if (setns(netns, CLONE_NEWNET) < 0)
                goto fail;
        report[0]++;
        if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
                goto fail;
        for (size_t i = 0; i < ARRAY_SIZE(ioctls); i++) {
                report[0]++;
                if (ioctl(s, ioctls[i].request, ioctls[i].arg) < 0)
                        goto fail;
        }
        _exit(0);
fail:
        report[1] = errno;
        (void)!write(report_fd, report, sizeof report);
        _exit(1);
}

/* Gives tap0 (made by slirp4netns) slirp's address, netmask, MTU and the
 * default route, from a child of ours joined to the sandbox's namespaces
 * (joining a user namespace takes a single-threaded process). Never lo: that
 * is bwrap's (see netns.h). */
static int tap_configure(int userns, int netns, int timeout_ms) {
        struct tap_setup t;
        tap_setup_init(&t);
        int report[2];
        if (pipe2(report, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int report_r = report[0], report_w = report[1];
        pid_t pid = fork();
        if (pid < 0)
                return log_error_errno(-errno, "sandbox: cannot fork to configure the sandbox's network: %m");
        if (pid == 0)
                tap_child(userns, netns, &t, report_w);
        close(TAKE_FD(report_w));
        int code = sandbox_reap(pid, timeout_ms);
        if (code == -ETIMEDOUT) {
                (void)kill(pid, SIGKILL);
                (void)sandbox_reap(pid, -1);
                return log_error_errno(code, "sandbox: configuring the sandbox's network took over %d ms", timeout_ms);
        }
        if (code == 0)
                return 0;
        int failed[2] = {0, 0};
        ssize_t n = read(report_r, failed, sizeof failed);
        if (n != (ssize_t)sizeof failed || failed[0] < 0 || (size_t)failed[0] >= ARRAY_SIZE(tap_steps) ||
            failed[1] <= 0)
                return log_error_errno(-EIO, "sandbox: configuring the sandbox's network failed (exit code %d)",
                                       code);
        return log_error_errno(-failed[1], "sandbox: cannot %s: %m", tap_steps[failed[0]]);
}

int sandbox_net_start(pid_t init_pid, int exit_fd, int timeout_ms, pid_t *ret_pid) {
        const char *slirp = sandbox_slirp_path();
        if (!slirp)
                return -ENOENT;
        if (init_pid <= 1 || exit_fd < 0)
                return -EINVAL;
        int64_t deadline = now_ms() + timeout_ms;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/net", (int)init_pid);
        _cleanup_close_ int netns = open(path, O_RDONLY | O_CLOEXEC);
        if (netns < 0)
                return log_error_errno(-errno, "sandbox: cannot open the network namespace of %d: %m", (int)init_pid);
        /* The user namespace that owns the network namespace, not
         * /proc/PID/ns/user: for --disable-userns bwrap moves pid 1 into a
         * nested user namespace during setup, which does not own it. */
        _cleanup_close_ int userns = ioctl(netns, NS_GET_USERNS);
        if (userns < 0)
                return log_error_errno(-errno, "sandbox: cannot find the owner of the sandbox's network: %m");
        (void)fcntl(userns, F_SETFD, FD_CLOEXEC);
        int ready[2];
        if (pipe2(ready, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int ready_r = ready[0], ready_w = ready[1];
        char userns_arg[64], ready_arg[32], exit_arg[32], mtu_arg[32], netns_arg[32];
        snprintf(userns_arg, sizeof userns_arg, "--userns-path=/proc/self/fd/%d", userns);
        snprintf(ready_arg, sizeof ready_arg, "--ready-fd=%d", ready_w);
        snprintf(exit_arg, sizeof exit_arg, "--exit-fd=%d", exit_fd);
        snprintf(mtu_arg, sizeof mtu_arg, "--mtu=%d", SLIRP_MTU);
        snprintf(netns_arg, sizeof netns_arg, "/proc/self/fd/%d", netns);
        /* No --configure: it would bring up lo too, which bwrap is setting
         * up meanwhile (it reports its pid before, and reads --block-fd
         * after); see netns.h. slirp4netns only creates tap0 here. */
        char *argv[] = {(char *)slirp, mtu_arg, "--disable-host-loopback", "--enable-seccomp", "--netns-type=path",
                        userns_arg, ready_arg, exit_arg, netns_arg, SLIRP_TAP, NULL};
        int keep[] = {netns, userns, ready_w, exit_fd};
        pid_t pid;
        /* Its chatter goes to /dev/null: a pipe nobody reads would stall it. */
        int r = proc_spawn(&(struct proc_opts){.argv = argv, .stdin_fd = -1, .out_fd = -1, .keep_fds = keep,
                                               .n_keep_fds = ARRAY_SIZE(keep)},
                           &pid);
        if (r < 0)
                return log_error_errno(r, "sandbox: cannot start %s: %m", slirp);
        close(TAKE_FD(ready_w));
        r = wait_ready(ready_r, timeout_ms);
        if (r < 0) {
                (void)kill(pid, SIGKILL);
                int code = sandbox_reap(pid, -1);
                if (r == -ETIMEDOUT)
                        return log_error_errno(r, "sandbox: slirp4netns did not start within %d ms", timeout_ms);
                return log_error_errno(r, "sandbox: slirp4netns failed (exit code %d)", code);
        }
        int64_t left = deadline - now_ms();
        r = tap_configure(userns, netns, left > 0 ? (int)left : 0);
        if (r < 0) {
                net_end(pid);
                return r;
        }
        *ret_pid = pid;
        return 0;
}

static void *net_end_thread(void *arg) {
        net_end((pid_t)(intptr_t)arg);
        return NULL;
}

void sandbox_net_release(pid_t pid) {
        if (pid <= 0)
                return;
        pthread_attr_t attr;
        pthread_t t;
        bool started = false;
        if (pthread_attr_init(&attr) == 0) {
                (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                (void)pthread_attr_setstacksize(&attr, 64 * 1024);
                started = pthread_create(&t, &attr, net_end_thread, (void *)(intptr_t)pid) == 0;
                pthread_attr_destroy(&attr);
        }
        if (!started)
                net_end(pid);
}

/* A nameserver a network namespace cannot reach: the host's loopback. */
static bool address_is_loopback(const char *a, size_t n) {
        return (n >= 4 && strncmp(a, "127.", 4) == 0) || (n == 3 && strncmp(a, "::1", 3) == 0) ||
               (n == 7 && strncmp(a, "0.0.0.0", 7) == 0) || (n == 2 && strncmp(a, "::", 2) == 0);
}

static int resolv_rewrite(const char *host, char **ret) {
        _cleanup_buf_ struct buf out = BUF_INIT(RESOLV_MAX + 256);
        bool have_ns = false, have_slirp = false;
        int r = 0;
        for (const char *line = host; *line && r >= 0;) {
                size_t n = strcspn(line, "\n");
                const char *s = line + strspn(line, " \t");
                if (strncmp(s, "nameserver", 10) == 0 && (s[10] == ' ' || s[10] == '\t')) {
                        const char *a = s + 10 + strspn(s + 10, " \t");
                        if (address_is_loopback(a, strcspn(a, " \t\n#;"))) {
                                if (!have_slirp)
                                        r = buf_puts(&out, "nameserver " SANDBOX_SLIRP_DNS "\n");
                                have_slirp = have_ns = true;
                                line += n + (line[n] == '\n');
                                continue;
                        }
                        have_ns = true;
                }
                if (r >= 0)
                        r = buf_printf(&out, "%.*s\n", (int)n, line);
                line += n + (line[n] == '\n');
        }
        if (r >= 0 && !have_ns)
                r = buf_puts(&out, "nameserver " SANDBOX_SLIRP_DNS "\n");
        if (r < 0)
                return r;
        char *d = buf_steal(&out);
        if (!d)
                return -ENOMEM;
        *ret = d;
        return 0;
}

/* Lexically normalises an absolute path ("." and ".." components). */
static int normalize_abs(const char *path, char **ret) {
        if (path[0] != '/' || strlen(path) >= PATH_MAX)
                return -EINVAL;
        _cleanup_free_ char *out = malloc(strlen(path) + 2);
        if (!out)
                return -ENOMEM;
        size_t len = 0;
        const char *s = path;
        while (*s) {
                s += strspn(s, "/");
                size_t n = strcspn(s, "/");
                if (n == 0 || (n == 1 && s[0] == '.')) {
                } else if (n == 2 && s[0] == '.' && s[1] == '.') {
                        while (len > 0 && out[len - 1] != '/')
                                len--;
                        if (len > 0)
                                len--;
                } else {
                        out[len++] = '/';
                        memcpy(out + len, s, n);
                        len += n;
                }
                s += n;
        }
        if (len == 0)
                out[len++] = '/';
        out[len] = 0;
        *ret = TAKE_PTR(out);
        return 0;
}

/* Where host_path lands inside: itself, or what a symlink points to. */
static int resolv_dest(const char *host_path, char **ret) {
        struct stat st;
        if (lstat(host_path, &st) < 0)
                return -errno;
        if (!S_ISLNK(st.st_mode)) {
                char *d = strdup(host_path);
                if (!d)
                        return -ENOMEM;
                *ret = d;
                return 0;
        }
        char target[PATH_MAX];
        ssize_t n = readlink(host_path, target, sizeof target - 1);
        if (n <= 0)
                return n < 0 ? -errno : -EINVAL;
        target[n] = 0;
        _cleanup_free_ char *joined = NULL;
        if (target[0] == '/')
                joined = strdup(target);
        else {
                const char *slash = strrchr(host_path, '/');
                if (!slash || xasprintf(&joined, "%.*s/%s", (int)(slash - host_path), host_path, target) < 0)
                        return -ENOMEM;
        }
        if (!joined)
                return -ENOMEM;
        return normalize_abs(joined, ret);
}

int sandbox_resolv_conf(const char *host_path, char **ret_content, char **ret_dest) {
        if (!host_path || host_path[0] != '/')
                return -EINVAL;
        _cleanup_free_ char *dest = NULL, *host = NULL, *content = NULL;
        int r = resolv_dest(host_path, &dest);
        if (r < 0)
                return r;
        r = read_file(host_path, RESOLV_MAX, &host, NULL);
        if (r == -ENOENT) /* a symlink to a resolver that is not running */
                host = strdup("");
        else if (r < 0)
                return log_warn_errno(r, "sandbox: cannot read '%s': %m", host_path);
        if (!host)
                return -ENOMEM;
        if ((r = resolv_rewrite(host, &content)) < 0)
                return r;
        *ret_content = TAKE_PTR(content);
        *ret_dest = TAKE_PTR(dest);
        return 0;
}
