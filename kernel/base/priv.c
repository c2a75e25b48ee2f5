#define _XOPEN_SOURCE_EXTENDED 1
#include "base/priv.h"
#include "base/log.h"
#include "base/proc.h"

#include <ftw.h>
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

static uid_t chown_uid;
static gid_t chown_gid;

static int chown_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st;
        (void)flag;
        (void)ftw;
        if (lchown(p, chown_uid, chown_gid) < 0 && errno != ENOENT)
                return -1;
        return 0;
}

int priv_path_reachable(const char *path, uid_t uid, gid_t gid, char **ret_blocker) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        for (char *s = p;; s++) {
                bool end = *s == 0;
                if (*s == '/' || end) {
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
        chown_uid = uid;
        chown_gid = gid;
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
                if (nftw(*p, chown_one, 32, FTW_PHYS | FTW_MOUNT) < 0)
                        return log_error_errno(-errno, "cannot hand '%s' to account '%s': %m", *p, PRIV_ACCOUNT);
        }
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                return log_error_errno(-errno, "cannot switch to account '%s': %m", PRIV_ACCOUNT);
        if (setuid(0) == 0 || geteuid() == 0)
                return log_error_errno(-EPERM, "dropping root did not stick");
        /* The account has no usable home; give children a harmless one. */
        setenv("HOME", "/nonexistent", 1);
        return 1;
}
