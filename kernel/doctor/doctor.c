/* doctor.c — the rows of `seed doctor`: each runs a check that lives with
 * what it checks, and words its result. */
#include "doctor/doctor.h"

#include "base/buf.h"
#include "base/fileio.h"
#include "base/priv.h"
#include "base/proc.h"
#include "config/config.h"
#include "pg/pg.h"
#include "registries/registries.h"
#include "sandbox/sandbox.h"

#include <pwd.h>
#include <sys/stat.h>

#define ENGINE_TIMEOUT_MS (30 * 1000)

void doctor_result_done(struct doctor_result *r) {
        free(r->detail);
        free(r->fix);
        *r = (struct doctor_result){0};
}

const char *doctor_status_name(enum doctor_status s) {
        static const char *const names[] = {
                [DOCTOR_OK] = "ok", [DOCTOR_FAIL] = "FAIL", [DOCTOR_WARN] = "warn", [DOCTOR_INFO] = "info",
        };
        return (unsigned)s < ARRAY_SIZE(names) ? names[s] : "?";
}

static int detail(char **ret_detail, const char *text) {
        *ret_detail = strdup(text);
        return *ret_detail ? 0 : -ENOMEM;
}

/* A sandbox check (what and fix apart), worded as a row. */
static int sandbox_row(int (*check)(char **, char **), const char *passed, char **ret_detail, char **ret_fix) {
        char *what = NULL, *fix = NULL;
        int r = check(&what, &fix);
        if (r >= 0)
                return detail(ret_detail, passed);
        *ret_detail = what;
        *ret_fix = fix;
        return r;
}

static int run_bwrap(const struct doctor_context *x, char **ret_detail, char **ret_fix) {
        return sandbox_row(sandbox_check_bwrap, SANDBOX_BWRAP_PATH, ret_detail, ret_fix);
}

static int run_userns(const struct doctor_context *x, char **ret_detail, char **ret_fix) {
        return sandbox_row(sandbox_check_userns, "bubblewrap creates a sandbox's namespaces here", ret_detail,
                           ret_fix);
}

static int run_seccomp(const struct doctor_context *x, char **ret_detail, char **ret_fix) {
        return sandbox_row(sandbox_check_seccomp, "bubblewrap loads Seed's system-call filter", ret_detail, ret_fix);
}

static int run_postgres(const struct doctor_context *x, char **ret_detail, char **ret_fix) {
        if (x->cfg && !strempty(x->cfg->database.url))
                return detail(ret_detail, "database.url is set: this Seed uses an external PostgreSQL");
        _cleanup_free_ char *bindir = NULL;
        char *why = NULL;
        int r = pg_find_bindir(&bindir, &why);
        if (r < 0) {
                *ret_detail = why;
                return r;
        }
        return xasprintf(ret_detail, "initdb and postgres in %s", bindir) < 0 ? -ENOMEM : 0;
}

/* Sandboxes have no network interface to the outside: their only way out
 * is the kernel's egress proxy. What evolution, build and test commands may
 * reach there: the registries the machine's package clients use, plus
 * seed.yaml's egress.registries (kernel/registries, as the kernel asks at
 * start), and the hosts the owner grants. None: they install nothing. */
static int run_network(const struct doctor_context *x, char **ret_detail, char **ret_fix) {
        struct registries r = {0};
        int k = registries_discover(x->cfg ? x->cfg->egress.registries : NULL, &r);
        if (k < 0)
                return k;
        struct buf b = BUF_INIT(16 * 1024);
        (void)buf_puts(&b, "no sandbox has a network interface; through the kernel's egress proxy, evolutions, "
                           "builds and tests reach ");
        for (size_t i = 0; i < r.n; i++)
                (void)buf_printf(&b, "%s%s (%s)", i ? ", " : "", r.v[i].host, r.v[i].from);
        if (r.n == 0)
                (void)buf_puts(&b, "no package registry");
        for (char **n = r.notes; n && *n; n++)
                (void)buf_printf(&b, "; %s", *n);
        (void)buf_puts(&b, "; the live organism, only the hosts you grant");
        bool none = r.n == 0;
        registries_done(&r);
        *ret_detail = buf_steal(&b);
        if (!*ret_detail)
                return -ENOMEM;
        if (none && !(*ret_fix = strdup("install the package clients the organism uses (npm, pip, go) or list "
                                         "hosts under egress.registries in seed.yaml")))
                return -ENOMEM;
        return none ? -ENOENT : 0;
}

/* The first container engine installed, or NULL. */
static const char *find_engine(void) {
        static const char *const engines[] = {"/usr/bin/podman", "/usr/local/bin/podman", "/usr/bin/docker",
                                              "/usr/local/bin/docker"};
        for (size_t i = 0; i < ARRAY_SIZE(engines); i++)
                if (access(engines[i], X_OK) == 0)
                        return engines[i];
        return NULL;
}

static int run_engine(const struct doctor_context *x, char **ret_detail, char **ret_fix) {
        const char *engine = find_engine();
        if (!engine) {
                (void)detail(ret_detail, "none (podman, docker): Seed runs natively, every command in a bubblewrap "
                                         "sandbox (--native); not a failure");
                return *ret_detail ? DOCTOR_NOTE : -ENOMEM;
        }
        struct passwd *pw = getpwuid(getuid());
        _cleanup_free_ char *home = NULL;
        if (xasprintf(&home, "HOME=%s", pw && pw->pw_dir ? pw->pw_dir : "/nonexistent") < 0)
                return -ENOMEM;
        char *argv[] = {(char *)engine, "info", NULL};
        char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", home, NULL};
        struct proc_result res = {0};
        int r = proc_run(&(struct proc_opts){.argv = argv, .envp = envp, .stdin_fd = -1, .out_fd = -1,
                                             .timeout_ms = ENGINE_TIMEOUT_MS, .out_head = 4096, .out_tail = 1},
                         &res);
        bool works = r == 0 && res.exit_code == 0 && !res.timed_out;
        if (works) {
                proc_result_done(&res);
                return xasprintf(ret_detail, "%s works: seed run starts the Seed in a container of its own "
                                             "(SEED_CONTAINER_ENGINE, --native: seed run --help)",
                                 engine) < 0 ? -ENOMEM : 0;
        }
        /* The last non-empty line says why, bounded. */
        const char *out = res.output ? res.output : "";
        size_t len = strlen(out);
        while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' '))
                len--;
        size_t start = len;
        while (start > 0 && out[start - 1] != '\n')
                start--;
        int n = (int)(len - start > 200 ? 200 : len - start);
        r = xasprintf(ret_detail, "%s is installed but '%s info' fails for this account%s%.*s; Seed runs natively "
                                  "(bubblewrap), so this is not a failure",
                      engine, strrchr(engine, '/') + 1, n ? ": " : "", n, out + start);
        proc_result_done(&res);
        return r < 0 ? -ENOMEM : DOCTOR_NOTE;
}

static int run_folder(const struct doctor_context *x, char **ret_detail, char **ret_fix) {
        _cleanup_free_ char *blocker = NULL;
        struct stat st;
        if (stat(x->seed_dir, &st) < 0)
                return errorf(-errno, ret_detail, "%s: %s", x->seed_dir, strerror(errno));
        int r = priv_path_reachable(x->seed_dir, getuid(), getgid(), &blocker);
        if (r < 0)
                return errorf(r, ret_detail, "%s: %s", x->seed_dir, strerror(-r));
        if (r == 0) {
                (void)xasprintf(ret_fix, "put the Seed where the account can reach it (e.g. under /srv/seeds), or "
                                         "'chmod o+x %s'",
                                blocker ? blocker : "?");
                return errorf(-EACCES, ret_detail, "%s is not reachable by this account: '%s' has no search "
                                                   "permission for it",
                              x->seed_dir, blocker ? blocker : "?");
        }
        if (st.st_mode & 077) {
                /* Not a failure: `seed run` takes the group and other bits off. */
                int k = xasprintf(ret_detail, "%s is reachable by this account and open to other local users (mode "
                                              "%04o); 'seed run' makes it 0700",
                                  x->seed_dir, (unsigned)(st.st_mode & 07777));
                return k < 0 ? -ENOMEM : DOCTOR_NOTE;
        }
        return xasprintf(ret_detail, "%s: reachable by this account, private (mode %04o)", x->seed_dir,
                         (unsigned)(st.st_mode & 07777)) < 0
                       ? -ENOMEM
                       : 0;
}

static int run_config(const struct doctor_context *x, char **ret_detail, char **ret_fix) {
        _cleanup_free_ char *path = path_join(x->seed_dir, "seed.yaml");
        _cleanup_(cfg_freep) struct cfg *cfg = NULL;
        char *err = NULL;
        if (!path)
                return -ENOMEM;
        int r = cfg_load(path, &cfg, &err);
        if (r < 0) {
                *ret_detail = err ? err : strdup("cannot be read");
                return r;
        }
        return xasprintf(ret_detail, "%s is valid (listens on %s)", path, cfg->server.addr) < 0 ? -ENOMEM : 0;
}

const struct doctor_check doctor_checks[] = {
        {"bubblewrap", true, false, run_bwrap, "'sudo apt-get install bubblewrap' (scripts/bootstrap does)"},
        {"user namespaces", true, false, run_userns,
         "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
         "user.max_user_namespaces > 0)"},
        {"seccomp", true, false, run_seccomp, "a kernel with seccomp filters, and a current libseccomp"},
        {"PostgreSQL", true, false, run_postgres, "'sudo apt-get install postgresql-15' (scripts/bootstrap does)"},
        {"sandbox network", false, false, run_network,
         "list the hosts evolutions need under egress.registries in seed.yaml"},
        {"container engine", false, false, run_engine, "none needed: Seed runs natively"},
        {"Seed folder", true, true, run_folder, "put the Seed under /srv/seeds (as root) or in your home"},
        {"seed.yaml", true, true, run_config, "fix what the line and column above name"},
};
const size_t doctor_n_checks = ARRAY_SIZE(doctor_checks);

int doctor_run(const struct doctor_check *c, const struct doctor_context *x, struct doctor_result *ret) {
        char *what = NULL, *fix = NULL;
        int r = c->run(x, &what, &fix);
        if (!what) {
                free(fix);
                return r < 0 ? r : -ENOMEM;
        }
        *ret = (struct doctor_result){
                .status = r == 0 ? DOCTOR_OK : r > 0 ? DOCTOR_INFO : c->needed ? DOCTOR_FAIL : DOCTOR_WARN,
                .detail = what,
                .fix = fix,
        };
        return 0;
}
