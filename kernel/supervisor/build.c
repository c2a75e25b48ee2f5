/* The kernel's binaries: built from the Seed's own source into
 * .seed/kernel-build, or the last good ones in .seed/kernel-good (kept once
 * a kernel ran SUPERVISOR_GOOD_AFTER_MS). */
#include "supervisor/supervisor.h"
#include "supervisor/supervisor-internal.h"

#include "base/fileio.h"
#include "base/log.h"
#include "base/proc.h"

#include <fcntl.h>

char *const supervisor_fixed_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/nonexistent",
                                      "TZ=UTC", NULL};
char *const supervisor_container_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/nonexistent",
                                          "TZ=UTC", "SEED_IN_CONTAINER=1", NULL};

void supervisor_bins_done(struct supervisor_bins *b) {
        free(b->kernel);
        free(b->bridge);
        *b = (struct supervisor_bins){0};
}

static int run_logged(const char *seed_dir, char *const *argv, const char *log_name, int timeout_ms) {
        _cleanup_free_ char *logp = NULL;
        if (xasprintf(&logp, "%s/.seed/logs/%s", seed_dir, log_name) < 0)
                return -ENOMEM;
        _cleanup_close_ int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        struct proc_result res = {0};
        int r = proc_run(&(struct proc_opts){.argv = argv, .envp = supervisor_fixed_env, .cwd = seed_dir,
                                             .stdin_fd = -1, .out_fd = fd, .timeout_ms = timeout_ms},
                         &res);
        if (r < 0)
                return r;
        return res.exit_code == 0 ? 0 : -EIO;
}

static const char *find_tool(const char *a, const char *b) {
        return access(a, X_OK) == 0 ? a : b;
}

int supervisor_bins_build(const char *seed_dir, const char *build_dir, struct supervisor_bins *ret) {
        _cleanup_free_ char *bdir = path_join(seed_dir, build_dir);
        _cleanup_free_ char *ninja_file = bdir ? path_join(bdir, "build.ninja") : NULL;
        if (!bdir || !ninja_file)
                return -ENOMEM;
        const char *meson = find_tool("/usr/bin/meson", "/usr/local/bin/meson");
        const char *ninja = find_tool("/usr/bin/ninja", "/usr/local/bin/ninja");
        int r;
        fprintf(stderr, "seed: building the kernel from %s (log: .seed/logs/kernel-build.log)\n", seed_dir);
        if (!path_exists(ninja_file)) {
                char *setup[] = {(char *)meson, "setup", bdir, (char *)seed_dir, "--buildtype=release",
                                 "-Dtests=false", "--wrap-mode=nodownload", "--prefix=/nonexistent", NULL};
                if ((r = run_logged(seed_dir, setup, "kernel-build.log", 10 * 60 * 1000)) < 0) {
                        rm_rf(bdir);
                        return r;
                }
        }
        char *build[] = {(char *)ninja, "-C", bdir, "cmd/seed-kernel/seed-kernel", "cmd/seed-bridge/seed-bridge",
                         NULL};
        if ((r = run_logged(seed_dir, build, "kernel-build.log", 20 * 60 * 1000)) < 0)
                return r;
        ret->kernel = path_join(bdir, "cmd/seed-kernel/seed-kernel");
        ret->bridge = path_join(bdir, "cmd/seed-bridge/seed-bridge");
        ret->fresh = true;
        return ret->kernel && ret->bridge ? 0 : -ENOMEM;
}

int supervisor_bins_last_good(const char *seed_dir, struct supervisor_bins *ret) {
        ret->kernel = path_join(seed_dir, ".seed/kernel-good/seed-kernel");
        ret->bridge = path_join(seed_dir, ".seed/kernel-good/seed-bridge");
        ret->fresh = false;
        if (!ret->kernel || !ret->bridge)
                return -ENOMEM;
        return access(ret->kernel, X_OK) == 0 && access(ret->bridge, X_OK) == 0 ? 0 : -ENOENT;
}

static int copy_bin(const char *from, const char *to) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_file(from, 256u << 20, &data, &len);
        return r < 0 ? r : write_file_atomic(to, data, len, 0755);
}

void supervisor_bins_promote(const char *seed_dir, struct supervisor_bins *b) {
        _cleanup_free_ char *dir = path_join(seed_dir, ".seed/kernel-good");
        _cleanup_free_ char *k = path_join(seed_dir, ".seed/kernel-good/seed-kernel");
        _cleanup_free_ char *br = path_join(seed_dir, ".seed/kernel-good/seed-bridge");
        if (!dir || !k || !br || mkdir_mode(dir, 0700) < 0)
                return;
        if (copy_bin(b->kernel, k) < 0 || copy_bin(b->bridge, br) < 0)
                log_warn("could not keep the kernel as the last good one");
        b->fresh = false;
}

int supervisor_bins_load(const char *seed_dir, const char *build_dir, struct supervisor_bins *ret) {
        int r = supervisor_bins_build(seed_dir, build_dir, ret);
        if (r == 0)
                return 0;
        supervisor_bins_done(ret);
        struct supervisor_decision d = supervisor_decide(&(struct supervisor_outcome){.end = SUPERVISOR_END_BUILD_FAILED});
        if (d.action == SUPERVISOR_FALL_BACK && supervisor_bins_last_good(seed_dir, ret) == 0) {
                log_warn("the kernel did not build (see .seed/logs/kernel-build.log); using the last good kernel");
                return 0;
        }
        supervisor_bins_done(ret);
        log_error("the kernel did not build and there is no last good kernel; see %s/.seed/logs/kernel-build.log",
                  seed_dir);
        return r;
}
