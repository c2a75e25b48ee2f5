#include "base/priv.h"
#include "base/log.h"
#include "base/proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>

static int lookup(uid_t *ret_uid, gid_t *ret_gid) {
        struct passwd *pw = getpwnam(PRIV_ACCOUNT);
        if (!pw)
                return -ENOENT;
        if (pw->pw_uid == 0)
                return -EPERM;
        *ret_uid = pw->pw_uid;
        *ret_gid = pw->pw_gid;
        return 0;
}

int priv_ensure_account(uid_t *ret_uid, gid_t *ret_gid) {
        if (lookup(ret_uid, ret_gid) == 0)
                return 0;
        const char *useradd = access("/usr/sbin/useradd", X_OK) == 0 ? "/usr/sbin/useradd" : "/sbin/useradd";
        char *argv[] = {(char *)useradd, "--system", "--user-group", "--no-create-home",
                        "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                        "--comment", "Seed (unprivileged)", PRIV_ACCOUNT, NULL};
        char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        struct proc_result res = {0};
        int r = proc_run(&(struct proc_opts){.argv = argv, .envp = envp, .stdin_fd = -1, .out_fd = -1,
                                             .timeout_ms = 60000},
                         &res);
        if (r < 0)
                return log_error_errno(r, "cannot run useradd to create account '%s': %m", PRIV_ACCOUNT);
        /* Another process may have created it at the same time (exit 9). */
        if (res.exit_code != 0 && lookup(ret_uid, ret_gid) < 0) {
                log_error("useradd %s failed (exit %d): %s", PRIV_ACCOUNT, res.exit_code,
                          res.output ? res.output : "");
                proc_result_done(&res);
                return -EIO;
        }
        proc_result_done(&res);
        return lookup(ret_uid, ret_gid);
}

/* Hands a tree to uid/gid without ever following a link: every directory is
 * opened beneath its parent's fd with O_NOFOLLOW, every entry changed with
 * fchownat(AT_SYMLINK_NOFOLLOW), so swapping a directory for a symlink while
 * we walk makes the walk fail instead of reaching outside. Files with more
 * than one link are left alone (a hard link may point anywhere), and .seed/
 * (where sandboxed code may have written) is never entered. */
static int chown_tree_at(int dirfd, uid_t uid, gid_t gid, int depth) {
        if (depth > 64)
                return -ELOOP;
        int fd = dup(dirfd);
        if (fd < 0)
                return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        int r = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d))) {
                const char *n = de->d_name;
                if (streq(n, ".") || streq(n, "..") || (depth == 0 && streq(n, ".seed")))
                        continue;
                struct stat st;
                if (fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        int sub = openat(dirfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0) {
                                r = -errno;
                                break;
                        }
                        r = chown_tree_at(sub, uid, gid, depth + 1);
                        close(sub);
                } else if (!S_ISLNK(st.st_mode) && (!S_ISREG(st.st_mode) || st.st_nlink > 1)) {
                        continue; /* links are changed themselves; odd files and hard links not at all */
                }
                if (r == 0 && fchownat(dirfd, n, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 && errno != ENOENT)
                        r = -errno;
        }
        closedir(d);
        return r;
}

int priv_chown_tree(const char *path, uid_t uid, gid_t gid) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_uid == uid)
                return 0; /* already handed over (by `seed new`, or an earlier run) */
        int r = chown_tree_at(fd, uid, gid, 0);
        if (r < 0)
                return r;
        return fchown(fd, uid, gid) < 0 ? -errno : 0;
}

int priv_path_reachable(const char *path, uid_t uid, gid_t gid, char **ret_blocker) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        /* The ancestors only: the directory itself is about to be handed
         * to uid (and is 0700 when `seed new` made it). */
        for (char *s = p;; s++) {
                bool end = *s == 0;
                if (*s == '/') {
                        char saved = *s;
                        *s = 0;
                        struct stat st;
                        const char *dir = *p ? p : "/";
                        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
                                mode_t need = st.st_uid == uid ? S_IXUSR : st.st_gid == gid ? S_IXGRP : S_IXOTH;
                                if (!(st.st_mode & need)) {
                                        if (ret_blocker)
                                                *ret_blocker = strdup(dir);
                                        return 0;
                                }
                        }
                        *s = saved;
                }
                if (end)
                        break;
        }
        return 1;
}

int priv_drop_if_root(char *const *chown_paths) {
        if (geteuid() != 0)
                return 0;
        uid_t uid;
        gid_t gid;
        int r = priv_ensure_account(&uid, &gid);
        if (r < 0)
                return r;
        for (char *const *p = chown_paths; p && *p; p++) {
                _cleanup_free_ char *blocker = NULL;
                r = priv_path_reachable(*p, uid, gid, &blocker);
                if (r == 0) {
                        log_error("'%s' is not reachable by the unprivileged account '%s': '%s' has no search "
                                  "permission for it. Put the Seed somewhere else (e.g. /srv/seeds) or run "
                                  "'chmod o+x %s'.",
                                  *p, PRIV_ACCOUNT, blocker ? blocker : "?", blocker ? blocker : "?");
                        return -EACCES;
                }
                if ((r = priv_chown_tree(*p, uid, gid)) < 0)
                        return log_error_errno(r, "cannot hand '%s' to account '%s': %m", *p, PRIV_ACCOUNT);
        }
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                return log_error_errno(-errno, "cannot switch to account '%s': %m", PRIV_ACCOUNT);
        if (setuid(0) == 0 || geteuid() == 0)
                return log_error_errno(-EPERM, "dropping root did not stick");
        /* The account has no usable home; give children a harmless one. */
        setenv("HOME", "/nonexistent", 1);
        return 1;
}
