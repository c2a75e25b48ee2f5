/* pg.c — the Seed's private PostgreSQL (initdb, start/stop), and what an
 * external server shares with it: roles and databases, connection strings,
 * scratch databases, the live data's dump and restore. Talks SQL only
 * through kernel/db. */
#include "pg/internal.h"
#include "base/buf.h"
#include "base/crypto.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/proc.h"
#include "db/db.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <locale.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#define PG_SANDBOX_SOCKET_DIR "/run/postgresql"
#define PG_READY_TIMEOUT_MS 60000
#define PG_STOP_TIMEOUT_MS 30000
#define PG_INITDB_TIMEOUT_MS 180000
#define PG_LOG_MAX_BYTES (10u << 20) /* postgres.log rotates like the kernel's logs: 10 MiB x 3 */
#define PG_LOG_KEEP 3
#define PG_LOG_LINE_MAX 4096         /* a longer line (a huge value in a message) is cut */
#define PG_LOG_JOIN_MS 5000
#define PG_SECRET_MAX 1024
#define PG_PASSWORD_BYTES 32

const char *const pg_role_names[ROLE_COUNT] = {"postgres", "organism", "evolver", "reader"};

/* Waits up to ms for the log thread (it ends once every postgres process
 * has closed the pipe); past that it is left to end on its own. */
static void pump_join(struct pg *pg, int ms) {
        if (!pg->pump_started)
                return;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        if (pthread_timedjoin_np(pg->pump, NULL, &ts) != 0)
                pthread_detach(pg->pump);
        pg->pump_started = false;
}

void pg_free(struct pg *pg) {
        if (!pg)
                return;
        pump_join(pg, PG_LOG_JOIN_MS);
        for (int i = 0; i < ROLE_COUNT; i++) {
                if (pg->passwords[i]) {
                        secure_zero(pg->passwords[i], strlen(pg->passwords[i]));
                        free(pg->passwords[i]);
                }
                free(pg->roles[i]);
        }
        pthread_mutex_destroy(&pg->live_lock);
        for (size_t i = 0; pg->server && pg->server[i]; i++)
                secure_zero(pg->server[i], strlen(pg->server[i]));
        strv_free(pg->server);
        free(pg->admin_db);
        free(pg->kernel_db);
        free(pg->live_db);
        free(pg->prefix);
        free(pg->datadir);
        free(pg->rundir);
        free(pg->secretsdir);
        free(pg->logpath);
        free(pg->bindir);
        free(pg);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pg *, pg_stop)
DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir)

static void sleep_ms(int ms) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static int role_index(const char *role) {
        for (int i = 0; role && i < ROLE_COUNT; i++)
                if (streq(role, pg_role_names[i]))
                        return i;
        return -1;
}

/* ---- binaries ---- */

static bool bindir_usable(const char *bindir) {
        _cleanup_free_ char *initdb = path_join(bindir, "initdb");
        _cleanup_free_ char *postgres = path_join(bindir, "postgres");
        return initdb && postgres && access(initdb, X_OK) == 0 && access(postgres, X_OK) == 0;
}

/* "15" -> 1500, "9.6" -> 906; -1 if not a version. */
static int parse_major(const char *s) {
        char *end;
        errno = 0;
        long major = strtol(s, &end, 10);
        if (errno || end == s || major < 1 || major > 999)
                return -1;
        long minor = 0;
        if (*end == '.') {
                const char *m = end + 1;
                minor = strtol(m, &end, 10);
                if (end == m || minor < 0 || minor > 99)
                        return -1;
        }
        return *end ? -1 : (int)(major * 100 + minor);
}

int pg_find_bindir(char **ret, char **ret_error) {
        _cleanup_(closedirp) DIR *d = NULL;
        d = opendir(PG_BINDIR_ROOT);
        if (!d)
                return errorf(-errno, ret_error, "PostgreSQL is not installed (%s: %s)", PG_BINDIR_ROOT,
                              strerror(errno));
        int best = -1;
        _cleanup_free_ char *best_dir = NULL;
        struct dirent *de;
        while ((de = readdir(d))) {
                int v = parse_major(de->d_name);
                if (v <= best)
                        continue;
                _cleanup_free_ char *bindir = NULL;
                if (xasprintf(&bindir, "%s/%s/bin", PG_BINDIR_ROOT, de->d_name) < 0)
                        return -ENOMEM;
                if (!bindir_usable(bindir))
                        continue;
                best = v;
                free(best_dir);
                best_dir = TAKE_PTR(bindir);
        }
        if (!best_dir)
                return errorf(-ENOENT, ret_error, "no PostgreSQL server binaries (initdb, postgres) under %s/<version>/bin",
                              PG_BINDIR_ROOT);
        *ret = TAKE_PTR(best_dir);
        return 0;
}

/* A data directory only runs with the major version that created it. */
static int bindir_for_datadir(const char *datadir, char **ret) {
        _cleanup_free_ char *vfile = path_join(datadir, "PG_VERSION");
        _cleanup_free_ char *v = NULL;
        if (!vfile)
                return -ENOMEM;
        int r = read_file(vfile, 64, &v, NULL);
        if (r < 0)
                return log_error_errno(r, "cannot read %s: %m", vfile);
        v[strcspn(v, " \r\n")] = 0;
        if (parse_major(v) < 0)
                return log_error_errno(-EINVAL, "%s holds no PostgreSQL version", vfile);
        _cleanup_free_ char *bindir = NULL;
        if (xasprintf(&bindir, "%s/%s/bin", PG_BINDIR_ROOT, v) < 0)
                return -ENOMEM;
        if (!bindir_usable(bindir))
                return log_error_errno(-ENOENT, "the database in %s was created by PostgreSQL %s, whose server "
                                                "binaries are not installed (%s)", datadir, v, bindir);
        *ret = TAKE_PTR(bindir);
        return 0;
}

/* ---- secrets ---- */

static int secret_path(const struct pg *pg, int role, char **ret) {
        if (role == ROLE_POSTGRES)
                return xasprintf(ret, "%s/postgres-password", pg->secretsdir);
        /* The name on the server: an external server's roles carry the
         * Seed's prefix, so their files never mix with the private ones'. */
        return xasprintf(ret, "%s/pg-%s", pg->secretsdir, pg->roles[role]);
}

/* Reads a password file; -ENOENT if missing. Forces mode 0600. */
int pg_secret_read(const char *path, char **ret) {
        _cleanup_free_ char *s = NULL;
        size_t len = 0;
        int r = read_file(path, PG_SECRET_MAX, &s, &len);
        if (r < 0)
                return r;
        if (chmod(path, 0600) < 0)
                return log_error_errno(-errno, "cannot restrict %s to mode 0600: %m", path);
        len = strcspn(s, "\r\n");
        s[len] = 0;
        for (size_t i = 0; i < len; i++)
                if (s[i] <= ' ' || s[i] == '\'' || s[i] == '\\' || s[i] > '~') {
                        secure_zero(s, len);
                        return log_error_errno(-EINVAL, "%s does not hold a usable password", path);
                }
        if (len == 0)
                return log_error_errno(-EINVAL, "%s is empty", path);
        *ret = TAKE_PTR(s);
        return 0;
}

int pg_secret_write(const char *path, const char *password) {
        _cleanup_free_ char *line = NULL;
        if (xasprintf(&line, "%s\n", password) < 0)
                return -ENOMEM;
        int r = write_file_atomic(path, line, strlen(line), 0600);
        secure_zero(line, strlen(line));
        if (r < 0)
                return log_error_errno(r, "cannot write %s: %m", path);
        return 0;
}

/* ---- paths and files ---- */

int pg_setup_paths(const char *seed_dir, struct pg *pg) {
        if (!seed_dir || seed_dir[0] != '/')
                return log_error_errno(-EINVAL, "the Seed folder must be an absolute path");
        _cleanup_free_ char *dot = path_join(seed_dir, ".seed");
        _cleanup_free_ char *logs = path_join(seed_dir, ".seed/logs");
        pg->datadir = path_join(seed_dir, ".seed/postgres");
        pg->rundir = path_join(seed_dir, ".seed/run");
        pg->secretsdir = path_join(seed_dir, ".seed/secrets");
        pg->logpath = path_join(seed_dir, ".seed/logs/postgres.log");
        if (!dot || !logs || !pg->datadir || !pg->rundir || !pg->secretsdir || !pg->logpath)
                return -ENOMEM;

        /* sun_path holds 107 bytes and a NUL. */
        size_t socklen = strlen(pg->rundir) + strlen(PG_SOCKET_NAME);
        if (socklen >= sizeof(((struct sockaddr_un *)0)->sun_path))
                return log_error_errno(-ENAMETOOLONG,
                                       "the PostgreSQL socket path '%s%s' is %zu bytes, longer than the %zu that "
                                       "Unix sockets allow: move the Seed to a shorter path",
                                       pg->rundir, PG_SOCKET_NAME, socklen,
                                       sizeof(((struct sockaddr_un *)0)->sun_path) - 1);

        int r = mkdir_p(dot, 0700);
        if (r < 0)
                return log_error_errno(r, "cannot create %s: %m", dot);
        const char *private_dirs[] = {pg->rundir, pg->secretsdir, logs};
        for (size_t i = 0; i < ARRAY_SIZE(private_dirs); i++)
                if ((r = mkdir_mode(private_dirs[i], 0700)) < 0)
                        return log_error_errno(r, "cannot create %s with mode 0700: %m", private_dirs[i]);
        return 0;
}

/* Only local (Unix socket) connections, each with a password. No host lines:
 * even if a TCP listener were ever configured, nothing could log in over it. */
static int write_hba(const struct pg *pg) {
        static const char hba[] =
                "# Written by the Seed kernel at every start; edits are overwritten.\n"
                "# Unix socket only (.seed/run, mode 0700), every role with its password.\n"
                "local all all scram-sha-256\n";
        _cleanup_free_ char *path = path_join(pg->datadir, "pg_hba.conf");
        if (!path)
                return -ENOMEM;
        int r = write_file_atomic(path, hba, sizeof(hba) - 1, 0600);
        if (r < 0)
                return log_error_errno(r, "cannot write %s: %m", path);
        return 0;
}

/* The fixed environment of initdb and postgres: nothing of the caller's. */
static void child_env(char *lang, size_t size, char *envp[4]) {
        locale_t l = newlocale(LC_ALL_MASK, "C.UTF-8", (locale_t)0);
        snprintf(lang, size, "LANG=%s", l ? "C.UTF-8" : "C");
        if (l)
                freelocale(l);
        envp[0] = "PATH=/usr/bin:/bin";
        envp[1] = lang;
        envp[2] = "TZ=UTC";
        envp[3] = NULL;
}

static int run_initdb(const struct pg *pg) {
        _cleanup_free_ char *initdb = path_join(pg->bindir, "initdb");
        _cleanup_free_ char *pwfile = NULL;
        int r = secret_path(pg, ROLE_POSTGRES, &pwfile);
        if (r < 0 || !initdb)
                return -ENOMEM;
        char lang[32];
        char *envp[4];
        child_env(lang, sizeof lang, envp);
        _cleanup_free_ char *pwopt = NULL, *localeopt = NULL;
        if (xasprintf(&pwopt, "--pwfile=%s", pwfile) < 0 || xasprintf(&localeopt, "--locale=%s", lang + 5) < 0)
                return -ENOMEM;
        char *argv[] = {initdb, "-D", pg->datadir, "-U", "postgres", "--auth-local=scram-sha-256",
                        "--auth-host=reject", pwopt, "-E", "UTF8", localeopt, "--no-instructions", NULL};
        struct proc_result res = {0};
        log_info("initialising the Seed's PostgreSQL in %s", pg->datadir);
        r = proc_run(&(struct proc_opts){.argv = argv, .envp = envp, .cwd = "/", .stdin_fd = -1, .out_fd = -1,
                                         .timeout_ms = PG_INITDB_TIMEOUT_MS, .out_head = 4096, .out_tail = 4096},
                     &res);
        if (r < 0)
                return log_error_errno(r, "cannot run %s: %m", initdb);
        if (res.exit_code != 0) {
                log_error("initdb failed (exit %d%s): %s", res.exit_code, res.timed_out ? ", timed out" : "",
                          res.output ? res.output : "");
                proc_result_done(&res);
                return -EIO;
        }
        proc_result_done(&res);
        return 0;
}

/* First start: a fresh password, then initdb. A data directory without
 * PG_VERSION is what an interrupted initdb leaves: start over. */
static int ensure_initdb(struct pg *pg, bool *ret_fresh) {
        _cleanup_free_ char *vfile = path_join(pg->datadir, "PG_VERSION");
        if (!vfile)
                return -ENOMEM;
        if (path_exists(vfile)) {
                *ret_fresh = false;
                return bindir_for_datadir(pg->datadir, &pg->bindir);
        }
        int r = rm_rf(pg->datadir);
        if (r < 0)
                return log_error_errno(r, "cannot remove the incomplete %s: %m", pg->datadir);
        _cleanup_free_ char *why = NULL;
        if ((r = pg_find_bindir(&pg->bindir, &why)) < 0)
                return log_error_errno(r, "%s (install the postgresql package)", why ? why : "no PostgreSQL");
        _cleanup_free_ char *pwfile = NULL, *password = NULL;
        if (secret_path(pg, ROLE_POSTGRES, &pwfile) < 0)
                return -ENOMEM;
        if ((r = crypto_random_hex(PG_PASSWORD_BYTES, &password)) < 0)
                return log_error_errno(r, "cannot generate a password: %m");
        r = pg_secret_write(pwfile, password);
        secure_zero(password, strlen(password));
        if (r < 0)
                return r;
        if ((r = run_initdb(pg)) < 0) {
                (void)rm_rf(pg->datadir);
                return r;
        }
        *ret_fresh = true;
        return 0;
}

/* ---- processes ---- */

static bool pid_is_zombie(pid_t pid) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        _cleanup_free_ char *s = NULL;
        if (read_file(path, 4096, &s, NULL) < 0)
                return false;
        const char *p = strrchr(s, ')'); /* comm may contain spaces */
        return p && p[1] == ' ' && p[2] == 'Z';
}

/* Whether pid is gone; reaps it if it is our child. */
static bool pid_gone(pid_t pid) {
        int status;
        pid_t k = waitpid(pid, &status, WNOHANG);
        if (k == pid)
                return true;
        if (kill(pid, 0) < 0 && errno == ESRCH)
                return true;
        return pid_is_zombie(pid);
}

static bool wait_gone(pid_t pid, int timeout_ms) {
        int64_t deadline = now_ms() + timeout_ms;
        for (;;) {
                if (pid_gone(pid))
                        return true;
                if (now_ms() >= deadline)
                        return false;
                sleep_ms(20);
        }
}

/* Fast shutdown of a postmaster, then SIGKILL of its process group. */
static void stop_postmaster(pid_t pid) {
        if (pid <= 1)
                return;
        if (kill(pid, SIGINT) < 0 && errno == ESRCH) {
                (void)pid_gone(pid);
                return;
        }
        if (wait_gone(pid, PG_STOP_TIMEOUT_MS))
                return;
        log_warn("PostgreSQL (pid %d) did not stop within %d s; killing it", (int)pid, PG_STOP_TIMEOUT_MS / 1000);
        (void)proc_kill_group(pid, SIGKILL);
        (void)wait_gone(pid, 5000);
}

/* A postmaster.pid left by a kernel that was killed: if that postmaster is
 * still serving this data directory, stop it; if the pid now belongs to an
 * unrelated process, the file is stale and would block the start. A dead pid
 * is left to postgres, which handles stale lock files itself. */
static int handle_stale_postmaster(const struct pg *pg) {
        _cleanup_free_ char *pidfile = path_join(pg->datadir, "postmaster.pid");
        _cleanup_free_ char *s = NULL;
        if (!pidfile)
                return -ENOMEM;
        int r = read_file(pidfile, 4096, &s, NULL);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return log_error_errno(r, "cannot read %s: %m", pidfile);
        long pid = strtol(s, NULL, 10);
        if (pid <= 1 || pid > INT_MAX || pid == getpid() || kill((pid_t)pid, 0) < 0 || pid_is_zombie((pid_t)pid)) {
                if (pid > 1 && pid <= INT_MAX)
                        (void)pid_gone((pid_t)pid); /* reap it if it was ours */
                return 0;
        }

        char link[64], cwd[PATH_MAX], real_datadir[PATH_MAX];
        snprintf(link, sizeof link, "/proc/%ld/cwd", pid);
        ssize_t n = readlink(link, cwd, sizeof cwd - 1);
        if (n < 0)
                return 0; /* not ours to inspect: let postgres decide */
        cwd[n] = 0;
        if (!realpath(pg->datadir, real_datadir))
                return log_error_errno(-errno, "cannot resolve %s: %m", pg->datadir);
        if (!streq(cwd, real_datadir)) {
                log_warn("removing stale %s (pid %ld is now another process)", pidfile, pid);
                if (unlink(pidfile) < 0 && errno != ENOENT)
                        return log_error_errno(-errno, "cannot remove %s: %m", pidfile);
                return 0;
        }
        log_warn("stopping PostgreSQL (pid %ld) left running by a previous kernel", pid);
        stop_postmaster((pid_t)pid);
        if (!pid_gone((pid_t)pid))
                return log_error_errno(-EBUSY, "PostgreSQL (pid %ld) left by a previous kernel does not stop", pid);
        return 0;
}

/* What the log thread owns: postgres.log and the pipe's read end. */
struct pg_pump {
        struct rotlog *log;
        int fd;
};

static void *pump_main(void *arg) {
        struct pg_pump *p = arg;
        rotlog_pump(p->log, p->fd, PG_LOG_LINE_MAX);
        close(p->fd);
        rotlog_free(p->log);
        free(p);
        return NULL;
}

/* postgres's stderr: a pipe that a thread copies into postgres.log,
 * rotated (10 MiB x 3) and with long lines cut, however much PostgreSQL
 * logs while it runs. *ret_fd is the write end, for postgres. */
static int start_log_pump(struct pg *pg, int *ret_fd) {
        struct pg_pump *p = calloc(1, sizeof *p);
        int fds[2] = {-1, -1};
        if (!p)
                return -ENOMEM;
        int r = rotlog_open(pg->logpath, PG_LOG_MAX_BYTES, PG_LOG_KEEP, &p->log);
        if (r < 0) {
                free(p);
                return log_error_errno(r, "cannot open %s: %m", pg->logpath);
        }
        if (pipe2(fds, O_CLOEXEC) < 0)
                r = log_error_errno(-errno, "cannot make a pipe for %s: %m", pg->logpath);
        p->fd = fds[0];
        if (r >= 0 && (r = -pthread_create(&pg->pump, NULL, pump_main, p)) < 0)
                log_error_errno(r, "cannot start the thread writing %s: %m", pg->logpath);
        if (r < 0) {
                if (fds[0] >= 0)
                        close(fds[0]), close(fds[1]);
                rotlog_free(p->log);
                free(p);
                return r;
        }
        pg->pump_started = true;
        *ret_fd = fds[1];
        return 0;
}

/* The last lines of postgres.log, small enough for one kernel log line. */
static char *log_tail(const struct pg *pg) {
        _cleanup_close_ int fd = open(pg->logpath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return strdup("(no log)");
        const off_t keep = 1200;
        off_t end = lseek(fd, 0, SEEK_END);
        off_t start = end > keep ? end - keep : 0;
        if (end < 0 || lseek(fd, start, SEEK_SET) < 0)
                return strdup("(unreadable log)");
        char *buf = calloc(1, (size_t)keep + 1);
        if (!buf)
                return NULL;
        ssize_t k = read(fd, buf, (size_t)keep);
        buf[k > 0 ? k : 0] = 0;
        char *nl = start > 0 ? strchr(buf, '\n') : NULL; /* start at a whole line */
        if (nl && nl[1])
                memmove(buf, nl + 1, strlen(nl + 1) + 1);
        return buf;
}

static int spawn_postgres(struct pg *pg) {
        _cleanup_free_ char *postgres = path_join(pg->bindir, "postgres");
        _cleanup_free_ char *sockdir = NULL;
        if (!postgres || xasprintf(&sockdir, "unix_socket_directories=%s", pg->rundir) < 0)
                return -ENOMEM;
        _cleanup_close_ int logfd = -1;
        pump_join(pg, PG_LOG_JOIN_MS); /* a previous start's */
        int r = start_log_pump(pg, &logfd);
        if (r < 0)
                return r;
        char lang[32];
        char *envp[4];
        child_env(lang, sizeof lang, envp);
        char *argv[] = {postgres, "-D", pg->datadir,
                        "-c", "listen_addresses=",
                        "-c", "port=" PG_PORT,
                        "-c", sockdir,
                        "-c", "unix_socket_permissions=0700",
                        "-c", "password_encryption=scram-sha-256",
                        "-c", "logging_collector=off",
                        "-c", "log_destination=stderr",
                        /* No statement text in the log: a failing statement
                         * of the organism's could be megabytes of it. */
                        "-c", "log_min_error_statement=panic",
                        "-c", "log_statement=none",
                        "-c", "log_min_duration_statement=-1",
                        "-c", "log_min_duration_sample=-1",
                        "-c", "log_parameter_max_length=0",
                        "-c", "log_parameter_max_length_on_error=0",
                        NULL};
        r = proc_spawn(&(struct proc_opts){.argv = argv, .envp = envp, .cwd = "/", .stdin_fd = -1, .out_fd = logfd},
                       &pg->pid);
        if (r < 0)
                return log_error_errno(r, "cannot start %s: %m", postgres);
        return 0;
}

/* ---- names and connection strings ---- */

/* The name on the server of a database callers name logically: the
 * administrator's ("postgres"), the kernel's, the live one, or a scratch
 * database (the Seed's prefix + its name). Caller frees. */
static int physical_db(const struct pg *pg, const char *name, char **ret) {
        const char *fixed = streq(name, "postgres") ? pg->admin_db
                            : streq(name, PG_KERNEL_DB) ? pg->kernel_db
                            : streq(name, PG_LIVE_DB) ? pg->live_db
                                                      : NULL;
        char *s = NULL;
        if (fixed ? !(s = strdup(fixed)) : xasprintf(&s, "%s%s", pg->prefix, name) < 0)
                return -ENOMEM;
        if (strlen(s) > PG_NAME_MAX) {
                free(s);
                return -ENAMETOOLONG;
        }
        *ret = s;
        return 0;
}

static int append_value(struct buf *b, const char *key, const char *value) {
        int r = buf_printf(b, "%s%s='", b->len ? " " : "", key);
        for (const char *p = value; r >= 0 && *p; p++) {
                if (*p == '\'' || *p == '\\')
                        r = buf_puts(b, "\\");
                if (r >= 0)
                        r = buf_append(b, p, 1);
        }
        return r < 0 ? r : buf_puts(b, "'");
}

/* host, port (and TLS settings) of the server, then dbname and user (names
 * on the server) and, when not NULL, the password. */
static int conninfo_for(const struct pg *pg, const char *user, const char *db, const char *password, char **ret) {
        _cleanup_buf_ struct buf b = BUF_INIT(8192);
        int r = 0;
        for (size_t k = 0; r >= 0 && pg->server[k] && pg->server[k + 1]; k += 2)
                r = append_value(&b, pg->server[k], pg->server[k + 1]);
        if (r >= 0)
                r = append_value(&b, "dbname", db);
        if (r >= 0)
                r = append_value(&b, "user", user);
        if (r >= 0 && password)
                r = append_value(&b, "password", password);
        if (r < 0) {
                secure_zero(b.data, b.len);
                return r;
        }
        *ret = buf_steal(&b);
        return 0;
}

/* The same for role i and a logical database name. */
static int build_conninfo(const struct pg *pg, int i, const char *dbname, bool with_password, char **ret) {
        _cleanup_free_ char *db = NULL;
        int r = physical_db(pg, dbname, &db);
        if (r < 0)
                return r;
        return conninfo_for(pg, pg->roles[i], db, with_password ? pg->passwords[i] : NULL, ret);
}

int pg_conninfo(const struct pg *pg, const char *role, const char *dbname, char **ret) {
        int i = role_index(role);
        /* Only an external server's administrator may have no password of
         * ours (libpq then finds one the usual ways). */
        if (!pg || i < 0 || strempty(dbname) || (!pg->passwords[i] && !(pg->external && i == ROLE_POSTGRES)))
                return -EINVAL;
        return build_conninfo(pg, i, dbname, true, ret);
}

static int append_encoded(struct buf *b, const char *s) {
        int r = 0;
        for (const char *p = s; r >= 0 && *p; p++) {
                unsigned char c = (unsigned char)*p;
                bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                             c == '-' || c == '_' || c == '.' || c == '~';
                r = plain ? buf_append(b, p, 1) : buf_printf(b, "%%%02X", c);
        }
        return r;
}

/* A postgresql:// URL through the socket dir as sandboxes see it (names on
 * the server). */
static int sandbox_url(const char *user, const char *password, const char *db, char **ret) {
        _cleanup_buf_ struct buf b = BUF_INIT(8192);
        int r = buf_puts(&b, "postgresql://");
        if (r >= 0)
                r = append_encoded(&b, user);
        if (r >= 0)
                r = buf_puts(&b, ":");
        if (r >= 0)
                r = append_encoded(&b, password);
        if (r >= 0)
                r = buf_puts(&b, "@/");
        if (r >= 0)
                r = append_encoded(&b, db);
        if (r >= 0)
                r = buf_puts(&b, "?host=" PG_SANDBOX_SOCKET_DIR);
        if (r < 0) {
                secure_zero(b.data, b.len);
                return r;
        }
        *ret = buf_steal(&b);
        return 0;
}

int pg_sandbox_url(const struct pg *pg, const char *role, const char *dbname, char **ret) {
        int i = role_index(role);
        if (!pg || i < 0 || strempty(dbname) || !pg->passwords[i])
                return -EINVAL;
        _cleanup_free_ char *db = NULL;
        int r = physical_db(pg, dbname, &db);
        return r < 0 ? r : sandbox_url(pg->roles[i], pg->passwords[i], db, ret);
}

static void conninfo_freep(char **s) {
        if (*s) {
                secure_zero(*s, strlen(*s));
                free(*s);
        }
}
#define _cleanup_conninfo_ _cleanup_(conninfo_freep)

/* ---- waiting for the server ---- */

static int wait_ready(struct pg *pg) {
        _cleanup_conninfo_ char *conninfo = NULL;
        int r = pg_conninfo(pg, "postgres", "postgres", &conninfo);
        if (r < 0)
                return r;
        int64_t deadline = now_ms() + PG_READY_TIMEOUT_MS;
        int pause = 10;
        for (;;) {
                int status = 0;
                pid_t k = waitpid(pg->pid, &status, WNOHANG);
                if (k == pg->pid || (k < 0 && pid_gone(pg->pid))) {
                        char code[32] = "unknown status";
                        if (k == pg->pid)
                                snprintf(code, sizeof code, "exit %d", proc_exit_code(status));
                        pg->pid = 0;
                        pump_join(pg, PG_LOG_JOIN_MS); /* all it wrote is in the file */
                        _cleanup_free_ char *tail = log_tail(pg);
                        log_error("PostgreSQL exited during start-up (%s); end of %s:\n%s", code, pg->logpath,
                                  tail ? tail : "");
                        return -EIO;
                }
                struct db *db = NULL;
                _cleanup_free_ char *err = NULL;
                r = db_connect_err(conninfo, &db, &err);
                if (r >= 0) {
                        db_close(db);
                        return 0;
                }
                if (err && strstr(err, "password authentication failed"))
                        return log_error_errno(-EACCES, "PostgreSQL rejects the superuser password kept in "
                                                        "%s/postgres-password", pg->secretsdir);
                if (now_ms() >= deadline) {
                        _cleanup_free_ char *tail = log_tail(pg);
                        log_error("PostgreSQL did not accept connections within %d s (%s); end of %s:\n%s",
                                  PG_READY_TIMEOUT_MS / 1000, err ? err : "?", pg->logpath, tail ? tail : "");
                        return -ETIMEDOUT;
                }
                sleep_ms(pause);
                if (pause < 100)
                        pause *= 2;
        }
}


/* ---- roles and databases ---- */

int pg_sql(struct db *db, const char *what, const char *text) {
        _cleanup_free_ char *err = NULL;
        int r = db_exec(db, text, &err);
        if (r < 0)
                return log_error_errno(r, "PostgreSQL: %s failed: %s", what, err ? err : "?");
        return 0;
}

static int exists(struct db *db, const char *query, const char *name, bool *ret) {
        _cleanup_free_ char *v = NULL;
        const char *p[] = {name};
        int r = db_query_value(db, query, 1, p, &v);
        if (r < 0 && r != -ENOENT)
                return r;
        *ret = r >= 0;
        return 0;
}

static int set_role_password(struct pg *pg, struct db *db, int i, const char *path) {
        const char *role = pg->roles[i];
        _cleanup_free_ char *password = NULL, *verifier = NULL, *qverifier = NULL, *stmt = NULL;
        int r = crypto_random_hex(PG_PASSWORD_BYTES, &password);
        if (r < 0)
                return log_error_errno(r, "cannot generate a password: %m");
        /* Only the SCRAM verifier goes over the wire (and into any log). */
        if ((r = db_encrypt_password(db, role, password, &verifier)) < 0 ||
            (r = db_quote_literal(db, verifier, &qverifier)) < 0 ||
            (r = xasprintf(&stmt, "ALTER ROLE %s PASSWORD %s", role, qverifier)) < 0)
                goto out;
        if ((r = pg_sql(db, "setting a role's password", stmt)) < 0 || (r = pg_secret_write(path, password)) < 0)
                goto out;
        pg->passwords[i] = TAKE_PTR(password);
out:
        if (password)
                secure_zero(password, strlen(password));
        return r;
}

/* What one role may take of the server: connections (CONNECTION LIMIT) and
 * the per-session defaults set on it. temp_file_limit only a superuser can
 * change (an external server's administrator usually is none: it is then
 * left out); the others are defaults a session may SET itself, so they stop
 * runaway code, not a determined one (CONNECTION LIMIT and temp_file_limit
 * do). Together the limits leave max_connections (100) room for the kernel. */
#define PG_SUPERUSER_SETTING "temp_file_limit"
static const struct role_limits {
        int connections;
        const char *settings[3][2];
} role_limits[ROLE_COUNT] = {
        [ROLE_ORGANISM] = {40, {{"statement_timeout", "60s"}, {"idle_in_transaction_session_timeout", "60s"},
                                {PG_SUPERUSER_SETTING, "1GB"}}},
        [ROLE_EVOLVER] = {20, {{"statement_timeout", "60s"}, {"idle_in_transaction_session_timeout", "60s"},
                               {PG_SUPERUSER_SETTING, "1GB"}}},
        [ROLE_READER] = {10, {{"statement_timeout", "60s"}, {"idle_in_transaction_session_timeout", "60s"},
                              {PG_SUPERUSER_SETTING, "1GB"}}},
};

/* l's limits on the role named role (a validated name of ours). */
static int set_role_limits(const struct pg *pg, struct db *db, const char *role, const struct role_limits *l) {
        _cleanup_free_ char *stmt = NULL;
        if (xasprintf(&stmt, "ALTER ROLE %s CONNECTION LIMIT %d", role, l->connections) < 0)
                return -ENOMEM;
        int r = pg_sql(db, "limiting a role's connections", stmt);
        for (size_t k = 0; r >= 0 && k < ARRAY_SIZE(l->settings) && l->settings[k][0]; k++) {
                if (!pg->admin_super && streq(l->settings[k][0], PG_SUPERUSER_SETTING))
                        continue;
                free(stmt);
                stmt = NULL;
                if (xasprintf(&stmt, "ALTER ROLE %s SET %s = '%s'", role, l->settings[k][0],
                              l->settings[k][1]) < 0)
                        return -ENOMEM;
                r = pg_sql(db, "setting a role's limits", stmt);
        }
        return r;
}

static int ensure_role(struct pg *pg, struct db *db, int i) {
        const char *role = pg->roles[i];
        _cleanup_free_ char *path = NULL, *stmt = NULL, *powers = NULL;
        bool have = false;
        int r = exists(db, "SELECT 1 FROM pg_roles WHERE rolname = $1", role, &have);
        if (r < 0 || secret_path(pg, i, &path) < 0)
                return r < 0 ? r : -ENOMEM;
        /* Role names are our own (validated) names: safe to put in SQL text.
         * No role creates databases: the kernel makes scratch DBs
         * (pg_scratch_create) with CONNECT revoked from PUBLIC, which a
         * role's own CREATE DATABASE would not do. Only a superuser may
         * name SUPERUSER, REPLICATION or BYPASSRLS at all; a new role has
         * none of them, and an existing one is checked below. */
        const char *attrs = pg->admin_super ? "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
                                            : "LOGIN NOCREATEDB NOCREATEROLE";
        if (xasprintf(&stmt, "%s ROLE %s %s", have ? "ALTER" : "CREATE", role, attrs) < 0)
                return -ENOMEM;
        if ((r = pg_sql(db, "creating a role", stmt)) < 0 || (r = set_role_limits(pg, db, role, &role_limits[i])) < 0)
                return r;
        const char *p[] = {role};
        if ((r = db_query_value(db, "SELECT rolsuper OR rolreplication OR rolbypassrls FROM pg_roles WHERE rolname = $1",
                                1, p, &powers)) < 0)
                return r;
        if (!streq(powers, "f"))
                return log_error_errno(-EPERM, "PostgreSQL role '%s' is a superuser or may replicate or bypass "
                                               "row security: refusing to give it to the organism", role);
        if (have) {
                r = pg_secret_read(path, &pg->passwords[i]);
                if (r != -ENOENT)
                        return r;
                log_warn("%s is missing; giving role '%s' a new password", path, role);
        }
        return set_role_password(pg, db, i, path);
}

static int ensure_database(struct db *db, const char *name, const char *owner) {
        bool have = false;
        int r = exists(db, "SELECT 1 FROM pg_database WHERE datname = $1", name, &have);
        if (r < 0)
                return r;
        /* The name is ours; the owner may be an external server's role, of
         * any spelling. */
        _cleanup_free_ char *stmt = NULL, *qowner = NULL;
        if ((r = db_quote_ident(db, owner, &qowner)) < 0)
                return r;
        if (have ? xasprintf(&stmt, "ALTER DATABASE %s OWNER TO %s", name, qowner) < 0
                 : xasprintf(&stmt, "CREATE DATABASE %s OWNER %s TEMPLATE template0 ENCODING 'UTF8'", name, qowner) < 0)
                return -ENOMEM;
        return pg_sql(db, have ? "setting a database's owner" : "creating a database", stmt);
}

int pg_admin_db(const struct pg *pg, struct db **ret) {
        _cleanup_conninfo_ char *conninfo = NULL;
        int r = pg_conninfo(pg, "postgres", "postgres", &conninfo);
        return r < 0 ? r : db_connect(conninfo, ret);
}

/* CONNECT (and TEMP, CREATE) revoked from PUBLIC on every database of
 * ours that accepts connections (template0 accepts none), CONNECT on the
 * live one granted to reader. A private server's own postgres and template1
 * are ours too; an external server's are not. */
static int restrict_databases(const struct pg *pg, struct db *db) {
        _cleanup_free_ char *stmt = NULL;
        if (xasprintf(&stmt, "REVOKE ALL ON DATABASE %s%s, %s FROM PUBLIC; GRANT CONNECT ON DATABASE %s TO %s",
                      pg->external ? "" : "postgres, template1, ", pg->kernel_db, pg->live_db, pg->live_db,
                      pg->roles[ROLE_READER]) < 0)
                return -ENOMEM;
        return pg_sql(db, "restricting database access", stmt);
}

/* The reader reads the live data: on the private server through
 * pg_read_all_data (every database there is the Seed's, and CONNECT is
 * granted on the live one only); on an external one through grants of the
 * live database's owner (pg_external_reader_grants). */
static int grant_reader(const struct pg *pg, struct db *db) {
        if (pg->external)
                return pg_external_reader_grants(pg);
        return pg_sql(db, "granting pg_read_all_data to reader", "GRANT pg_read_all_data TO reader");
}

static int migrate_kernel_db(struct pg *pg) {
        _cleanup_conninfo_ char *conninfo = NULL;
        int r = pg_conninfo(pg, "postgres", PG_KERNEL_DB, &conninfo);
        if (r < 0)
                return r;
        _cleanup_(db_closep) struct db *db = NULL;
        if ((r = db_connect(conninfo, &db)) < 0)
                return r;
        _cleanup_free_ struct db_migration *m = NULL;
        size_t n = 0;
        if ((r = db_kernel_migrations(&m, &n)) < 0)
                return r;
        _cleanup_free_ char *err = NULL;
        r = db_migrate(db, DB_KERNEL_MIGRATIONS_TABLE, m, n, &err);
        if (r < 0)
                return log_error_errno(r, "kernel database: %s", err ? err : "migration failed");
        if (r > 0)
                log_info("kernel database: applied %d migration(s)", r);
        return 0;
}

int pg_bootstrap(struct pg *pg) {
        _cleanup_(db_closep) struct db *db = NULL;
        int r = pg_admin_db(pg, &db);
        if (r < 0)
                return r;
        for (int i = ROLE_ORGANISM; i < ROLE_COUNT; i++)
                if ((r = ensure_role(pg, db, i)) < 0)
                        return r;
        /* An administrator that is no superuser acts on the roles' databases
         * (owner changes, DROP ... WITH (FORCE), scratch databases owned by
         * evolver) as a member of the roles it created. */
        if (!pg->admin_super) {
                _cleanup_free_ char *stmt = NULL;
                if (xasprintf(&stmt, "GRANT %s, %s, %s TO CURRENT_USER", pg->roles[ROLE_ORGANISM],
                              pg->roles[ROLE_EVOLVER], pg->roles[ROLE_READER]) < 0)
                        return -ENOMEM;
                if ((r = pg_sql(db, "joining the Seed's roles", stmt)) < 0)
                        return r;
        }
        if ((r = ensure_database(db, pg->kernel_db, pg->roles[ROLE_POSTGRES])) < 0 ||
            (r = ensure_database(db, pg->live_db, pg->roles[ROLE_ORGANISM])) < 0 ||
            (r = restrict_databases(pg, db)) < 0 || (r = grant_reader(pg, db)) < 0)
                return r;
        return migrate_kernel_db(pg);
}

/* ---- scratch databases ---- */

static bool scratch_name_valid(const char *name) {
        static const char *const reserved[] = {"postgres", "template0", "template1", PG_KERNEL_DB, PG_LIVE_DB};
        if (!name || !(name[0] >= 'a' && name[0] <= 'z') || strlen(name) > 63)
                return false;
        for (const char *p = name; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
                        return false;
        for (size_t i = 0; i < ARRAY_SIZE(reserved); i++)
                if (streq(name, reserved[i]))
                        return false;
        return true;
}

int pg_scratch_drop(const struct pg *pg, const char *name) {
        if (!pg || !scratch_name_valid(name))
                return -EINVAL;
        _cleanup_(db_closep) struct db *db = NULL;
        _cleanup_free_ char *stmt = NULL, *phys = NULL;
        int r = physical_db(pg, name, &phys);
        if (r < 0 || (r = pg_admin_db(pg, &db)) < 0)
                return r;
        /* The name is validated: plain identifier, safe in SQL text. */
        if (xasprintf(&stmt, "DROP DATABASE IF EXISTS %s WITH (FORCE)", phys) < 0)
                return -ENOMEM;
        return pg_sql(db, "dropping a scratch database", stmt);
}

int pg_scratch_create(const struct pg *pg, const char *name) {
        if (!pg || !scratch_name_valid(name))
                return -EINVAL;
        _cleanup_(db_closep) struct db *db = NULL;
        _cleanup_free_ char *drop = NULL, *create = NULL, *revoke = NULL, *phys = NULL;
        int r = physical_db(pg, name, &phys);
        if (r < 0 || (r = pg_admin_db(pg, &db)) < 0)
                return r;
        if (xasprintf(&drop, "DROP DATABASE IF EXISTS %s WITH (FORCE)", phys) < 0 ||
            xasprintf(&create, "CREATE DATABASE %s OWNER %s TEMPLATE template0 ENCODING 'UTF8'", phys,
                      pg->roles[ROLE_EVOLVER]) < 0 ||
            xasprintf(&revoke, "REVOKE ALL ON DATABASE %s FROM PUBLIC", phys) < 0)
                return -ENOMEM;
        /* CREATE DATABASE cannot share a transaction: one statement each. */
        if ((r = pg_sql(db, "dropping a scratch database", drop)) < 0 ||
            (r = pg_sql(db, "creating a scratch database", create)) < 0 ||
            (r = pg_sql(db, "restricting a scratch database", revoke)) < 0)
                return r;
        const char *p[] = {phys, pg->roles[ROLE_EVOLVER], pg->roles[ROLE_POSTGRES]};
        _cleanup_free_ char *err = NULL;
        r = db_execp(db,
                     "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 "
                     "AND usename NOT IN ($2, $3)",
                     3, p, &err);
        if (r < 0)
                return log_error_errno(r, "PostgreSQL: closing stray sessions failed: %s", err ? err : "?");
        return 0;
}

int pg_scratch_list(const struct pg *pg, const char *start, char ***ret) {
        if (!pg || !start || !ret)
                return -EINVAL;
        _cleanup_(db_closep) struct db *db = NULL;
        _cleanup_free_ char *first = NULL, *names = NULL;
        _cleanup_strv_free_ char **out = NULL;
        int r = pg_admin_db(pg, &db);
        if (r < 0)
                return r;
        /* compared by left(), since names hold LIKE's '_' */
        if (xasprintf(&first, "%s%s", pg->prefix, start) < 0)
                return -ENOMEM;
        const char *p[] = {first};
        r = db_query_value(db,
                           "SELECT string_agg(datname, ' ' ORDER BY datname) FROM pg_database "
                           "WHERE left(datname, length($1)) = $1",
                           1, p, &names);
        if (r < 0 && r != -ENOENT)
                return r;
        size_t skip = strlen(pg->prefix);
        for (char *save = NULL, *n = names ? strtok_r(names, " ", &save) : NULL; n; n = strtok_r(NULL, " ", &save))
                if (scratch_name_valid(n + skip) && strv_push(&out, n + skip) < 0)
                        return -ENOMEM;
        *ret = TAKE_PTR(out);
        return 0;
}

/* ---- live-data backups ---- */

#define PG_BACKUP_TIMEOUT_MS (10 * 60 * 1000)

/* Runs a client tool (pg_dump, pg_restore) as user (a name on the server)
 * against database db: argv (room for 3 more) gets "--dbname", a conninfo
 * without the password and trailing (a file, or NULL) appended. The
 * password goes through a passfile in .seed/secrets (0700; the file 0600,
 * removed after), never through argv or the environment, and never in the
 * socket dir: sandboxes see that one, and a running sandbox would see a
 * file created there after it started. */
static int run_client_as(const struct pg *pg, const char *user, const char *password, const char *db, char **argv,
                         size_t argc, char *trailing, const char *what) {
        _cleanup_free_ char *passfile = NULL, *line = NULL, *envpass = NULL, *dbname = NULL;
        if (!pg->bindir)
                return log_error_errno(-ENOENT, "%s needs PostgreSQL's %s, which is not installed", what, argv[0]);
        _cleanup_free_ char *tool = path_join(pg->bindir, argv[0]);
        int r = conninfo_for(pg, user, db, NULL, &dbname);
        if (r < 0 || !tool)
                return r < 0 ? r : -ENOMEM;
        if (xasprintf(&passfile, "%s/.pgpass-%d", pg->secretsdir, (int)getpid()) < 0 ||
            xasprintf(&line, "*:*:*:%s:%s\n", user, password) < 0 ||
            xasprintf(&envpass, "PGPASSFILE=%s", passfile) < 0)
                return -ENOMEM;
        argv[0] = tool;
        argv[argc] = "--dbname";
        argv[argc + 1] = dbname;
        argv[argc + 2] = trailing;
        argv[argc + 3] = NULL;
        r = write_file_atomic(passfile, line, strlen(line), 0600);
        secure_zero(line, strlen(line));
        if (r < 0)
                return log_error_errno(r, "cannot write a passfile for %s: %m", what);
        char lang[32];
        char *base[4];
        child_env(lang, sizeof lang, base);
        char *envp[] = {base[0], base[1], base[2], envpass, NULL};
        struct proc_result res = {0};
        r = proc_run(&(struct proc_opts){.argv = argv, .envp = envp, .cwd = "/", .stdin_fd = -1, .out_fd = -1,
                                         .timeout_ms = PG_BACKUP_TIMEOUT_MS, .out_head = 4096, .out_tail = 4096},
                     &res);
        (void)unlink(passfile);
        if (r < 0)
                return log_error_errno(r, "cannot run %s: %m", tool);
        if (res.exit_code != 0) {
                log_error("%s failed (exit %d%s): %s", what, res.exit_code, res.timed_out ? ", timed out" : "",
                          res.output ? res.output : "");
                /* The one cause the caller can name to the owner. */
                r = res.output && strstr(res.output, "No space left on device") ? -ENOSPC : -EIO;
        }
        proc_result_done(&res);
        return r;
}

/* The same as organism against the live database. */
static int run_client(const struct pg *pg, char **argv, size_t argc, char *trailing, const char *what) {
        return run_client_as(pg, pg->roles[ROLE_ORGANISM], pg->passwords[ROLE_ORGANISM], pg->live_db, argv, argc,
                             trailing, what);
}

int pg_live_backup(const struct pg *pg, const char *path) {
        if (!pg || !path || !pg->passwords[ROLE_ORGANISM])
                return -EINVAL;
        _cleanup_free_ char *tmp = NULL;
        if (xasprintf(&tmp, "%s.tmp", path) < 0)
                return -ENOMEM;
        (void)unlink(tmp);
        char *argv[10] = {"pg_dump", "--no-password", "--format", "custom", "--file", tmp};
        int r = run_client(pg, argv, 6, NULL, "backing up the live database");
        if (r >= 0 && chmod(tmp, 0600) < 0)
                r = -errno;
        if (r >= 0 && rename(tmp, path) < 0)
                r = log_error_errno(-errno, "cannot move the backup into place: %m");
        if (r < 0)
                (void)unlink(tmp);
        return r;
}

int pg_live_restore(const struct pg *pg, const char *path) {
        if (!pg || !path || !pg->passwords[ROLE_ORGANISM])
                return -EINVAL;
        if (access(path, R_OK) < 0)
                return log_error_errno(-errno, "no backup at %s: %m", path);
        _cleanup_(db_closep) struct db *db = NULL;
        _cleanup_free_ char *drop = NULL, *create = NULL;
        int r = pg_admin_db(pg, &db);
        if (r < 0)
                return r;
        if (xasprintf(&drop, "DROP DATABASE IF EXISTS %s WITH (FORCE)", pg->live_db) < 0 ||
            xasprintf(&create, "CREATE DATABASE %s OWNER %s TEMPLATE template0 ENCODING 'UTF8'", pg->live_db,
                      pg->roles[ROLE_ORGANISM]) < 0)
                return -ENOMEM;
        /* The reader's grants come first on an external server: default
         * privileges belong to a database, and the restored objects (made by
         * organism) get them as they are created. */
        if ((r = pg_sql(db, "dropping the live database", drop)) < 0 ||
            (r = pg_sql(db, "recreating the live database", create)) < 0 ||
            (r = restrict_databases(pg, db)) < 0 || (pg->external && (r = grant_reader(pg, db)) < 0))
                return r;
        char *argv[10] = {"pg_restore", "--no-password", "--no-owner", "--no-privileges", "--single-transaction",
                          "--exit-on-error"};
        if ((r = run_client(pg, argv, 6, (char *)path, "restoring the live database")) < 0)
                return r;
        return pg->external ? grant_reader(pg, db) : 0;
}

/* ---- start / stop ---- */

int pg_start(const char *seed_dir, struct pg **ret) {
        if (geteuid() == 0)
                return log_error_errno(-EPERM, "PostgreSQL refuses to run as root: the seed CLI switches to the "
                                               "unprivileged '%s' account before starting a Seed", "seed");
        _cleanup_(pg_freep) struct pg *pg = calloc(1, sizeof(*pg));
        if (!pg)
                return -ENOMEM;
        pthread_mutex_init(&pg->live_lock, NULL);
        int r = pg_setup_paths(seed_dir, pg);
        if (r < 0)
                return r;
        pg->prefix = strdup("");
        pg->admin_db = strdup("postgres");
        pg->kernel_db = strdup(PG_KERNEL_DB);
        pg->live_db = strdup(PG_LIVE_DB);
        if (!pg->prefix || !pg->admin_db || !pg->kernel_db || !pg->live_db ||
            strv_push(&pg->server, "host") < 0 || strv_push(&pg->server, pg->rundir) < 0 ||
            strv_push(&pg->server, "port") < 0 || strv_push(&pg->server, PG_PORT) < 0)
                return -ENOMEM;
        for (int i = 0; i < ROLE_COUNT; i++)
                if (!(pg->roles[i] = strdup(pg_role_names[i])))
                        return -ENOMEM;
        pg->admin_super = true;
        bool fresh = false;
        if ((r = handle_stale_postmaster(pg)) < 0 || (r = ensure_initdb(pg, &fresh)) < 0)
                return r;
        _cleanup_free_ char *pwfile = NULL;
        if (secret_path(pg, ROLE_POSTGRES, &pwfile) < 0)
                return -ENOMEM;
        r = pg_secret_read(pwfile, &pg->passwords[ROLE_POSTGRES]);
        if (r < 0)
                return log_error_errno(r, "cannot read the PostgreSQL superuser password %s: %m", pwfile);
        if ((r = write_hba(pg)) < 0 || (r = spawn_postgres(pg)) < 0)
                return r;

        /* From here on a failure also stops the server. */
        _cleanup_(pg_stopp) struct pg *running = TAKE_PTR(pg);
        if ((r = wait_ready(running)) < 0 || (r = pg_bootstrap(running)) < 0)
                return r;
        log_info("PostgreSQL ready (pid %d, socket in %s%s)", (int)running->pid, running->rundir,
                 fresh ? ", new database" : "");
        *ret = TAKE_PTR(running);
        return 0;
}

int pg_check(struct pg *pg, char **ret_why) {
        if (!pg || pg->external)
                return 0;
        int status = 0;
        pid_t dead = pg->pid;
        char why[96];
        if (dead > 0) {
                pid_t k = waitpid(dead, &status, WNOHANG);
                if (k == 0 || (k < 0 && !pid_gone(dead)))
                        return 0; /* running */
                if (k == dead && WIFSIGNALED(status))
                        snprintf(why, sizeof why, "PostgreSQL (pid %d) was killed by signal %d", (int)dead,
                                 WTERMSIG(status));
                else if (k == dead)
                        snprintf(why, sizeof why, "PostgreSQL (pid %d) exited with code %d", (int)dead,
                                 proc_exit_code(status));
                else
                        snprintf(why, sizeof why, "PostgreSQL (pid %d) is gone", (int)dead);
                log_error("%s", why);
                /* Its backends end once they notice; the group goes now, so
                 * the shared memory they hold is free for the next one. */
                (void)proc_kill_group(dead, SIGKILL);
                pg->pid = 0;
        } else
                snprintf(why, sizeof why, "PostgreSQL is down");
        char *w = strdup(why);
        if (!w)
                return -ENOMEM;
        *ret_why = w;
        return -ESRCH;
}

int pg_restart(struct pg *pg) {
        if (!pg || pg->external || pg->pid > 0)
                return 0;
        int r = spawn_postgres(pg);
        if (r >= 0 && (r = wait_ready(pg)) < 0 && pg->pid > 0) {
                stop_postmaster(pg->pid);
                pg->pid = 0;
        }
        if (r < 0)
                return r;
        log_info("PostgreSQL started again (pid %d)", (int)pg->pid);
        return 0;
}

void pg_stop(struct pg *pg) {
        if (!pg)
                return;
        pg_relay_stop(pg->relay);
        pg->relay = NULL;
        if (!pg->external)
                stop_postmaster(pg->pid);
        pg_free(pg);
}

const char *pg_socket_dir(const struct pg *pg) { return pg ? pg->rundir : NULL; }

pid_t pg_pid(const struct pg *pg) { return pg ? pg->pid : 0; }

bool pg_is_external(const struct pg *pg) { return pg && pg->external; }

/* ---- copies of the live data, for previews ---- */

static bool copy_name_valid(const char *name) {
        size_t n = strlen(PG_LIVE_COPY_PREFIX);
        if (!name || strncmp(name, PG_LIVE_COPY_PREFIX, n) != 0 || !name[n] || strlen(name) > 63)
                return false;
        for (const char *p = name + n; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
                        return false;
        return true;
}

/* The copy's database and role on the server: the Seed's prefix + name. */
static int copy_physical(const struct pg *pg, const char *name, char **ret) {
        if (!copy_name_valid(name))
                return -EINVAL;
        return physical_db(pg, name, ret);
}

void pg_live_copy_done(struct pg_live_copy *c) {
        if (!c)
                return;
        if (c->password)
                secure_zero(c->password, strlen(c->password));
        free(c->password);
        free(c->name);
        *c = (struct pg_live_copy){0};
}

/* Drops the copy's database (ending its sessions) and then its role; phys
 * is a validated name on the server. */
static int copy_drop(struct db *db, const char *phys) {
        _cleanup_free_ char *drop_db = NULL, *drop_role = NULL;
        if (xasprintf(&drop_db, "DROP DATABASE IF EXISTS %s WITH (FORCE)", phys) < 0 ||
            xasprintf(&drop_role, "DROP ROLE IF EXISTS %s", phys) < 0)
                return -ENOMEM;
        int r = pg_sql(db, "dropping a copy of the live data", drop_db);
        return r < 0 ? r : pg_sql(db, "dropping a copy's role", drop_role);
}

int pg_live_copy_drop(const struct pg *pg, const char *name) {
        if (!pg)
                return -EINVAL;
        _cleanup_(db_closep) struct db *db = NULL;
        _cleanup_free_ char *phys = NULL;
        int r = copy_physical(pg, name, &phys);
        if (r < 0 || (r = pg_admin_db(pg, &db)) < 0)
                return r;
        return copy_drop(db, phys);
}

int pg_live_copy_drop_all(const struct pg *pg) {
        if (!pg)
                return -EINVAL;
        _cleanup_(db_closep) struct db *db = NULL;
        int r = pg_admin_db(pg, &db);
        if (r < 0)
                return r;
        /* Names of this Seed's copies (its prefix, then PG_LIVE_COPY_PREFIX);
         * compared by left(), since the prefix holds LIKE's '_'. */
        _cleanup_free_ char *start = NULL, *names = NULL;
        if (xasprintf(&start, "%s%s", pg->prefix, PG_LIVE_COPY_PREFIX) < 0)
                return -ENOMEM;
        const char *p[] = {start};
        r = db_query_value(db,
                           "SELECT string_agg(n, ' ') FROM (SELECT datname AS n FROM pg_database UNION "
                           "SELECT rolname FROM pg_roles) x WHERE left(n, length($1)) = $1",
                           1, p, &names);
        if (r == -ENOENT || (r >= 0 && !names))
                return 0;
        if (r < 0)
                return r;
        int dropped = 0;
        size_t skip = strlen(pg->prefix);
        for (char *save = NULL, *n = strtok_r(names, " ", &save); n; n = strtok_r(NULL, " ", &save)) {
                if (!copy_name_valid(n + skip))
                        continue;
                if ((r = copy_drop(db, n)) < 0)
                        return r;
                dropped++;
        }
        if (dropped)
                log_info("dropped %d cop%s of the live data left by an earlier kernel", dropped,
                         dropped == 1 ? "y" : "ies");
        return dropped;
}

/* The new role phys: its own fresh password (kept only in memory by the
 * caller), the organism's limits; an administrator that is no superuser
 * joins it (to own and drop its database). */
static int copy_role(const struct pg *pg, struct db *db, const char *phys, char **ret_password) {
        _cleanup_free_ char *password = NULL, *verifier = NULL, *qverifier = NULL, *create = NULL, *join = NULL;
        int r = crypto_random_hex(PG_PASSWORD_BYTES, &password);
        if (r < 0)
                return r;
        if ((r = db_encrypt_password(db, phys, password, &verifier)) < 0 ||
            (r = db_quote_literal(db, verifier, &qverifier)) < 0)
                goto out;
        const char *attrs = pg->admin_super ? "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
                                            : "LOGIN NOCREATEDB NOCREATEROLE";
        if (xasprintf(&create, "CREATE ROLE %s %s PASSWORD %s", phys, attrs, qverifier) < 0 ||
            (!pg->admin_super && xasprintf(&join, "GRANT %s TO CURRENT_USER", phys) < 0)) {
                r = -ENOMEM;
                goto out;
        }
        if ((r = pg_sql(db, "creating a copy's role", create)) < 0 ||
            (r = set_role_limits(pg, db, phys, &role_limits[ROLE_ORGANISM])) < 0 ||
            (join && (r = pg_sql(db, "joining a copy's role", join)) < 0))
                goto out;
        *ret_password = TAKE_PTR(password);
out:
        if (password)
                secure_zero(password, strlen(password));
        return r;
}

/* Dumps the live database as organism and restores it into the copy as its
 * own role (which then owns every object). */
static int copy_data(const struct pg *pg, const char *phys, const char *password) {
        _cleanup_free_ char *dump = NULL;
        if (xasprintf(&dump, "%s/.copy-%s.dump", pg->secretsdir, phys) < 0)
                return -ENOMEM;
        int r = pg_live_backup(pg, dump);
        if (r >= 0) {
                char *argv[10] = {"pg_restore", "--no-password", "--no-owner", "--no-privileges",
                                  "--single-transaction", "--exit-on-error"};
                r = run_client_as(pg, phys, password, phys, argv, 6, dump, "restoring a copy of the live data");
        }
        (void)unlink(dump);
        return r;
}

int pg_live_copy_create(const struct pg *pg, const char *name, int64_t max_bytes, struct pg_live_copy *ret) {
        if (!pg || max_bytes < 0 || !ret || !pg->passwords[ROLE_ORGANISM])
                return -EINVAL;
        _cleanup_(db_closep) struct db *db = NULL;
        _cleanup_(pg_live_copy_done) struct pg_live_copy c = {0};
        _cleanup_free_ char *phys = NULL, *size = NULL, *create = NULL, *revoke = NULL;
        int r = copy_physical(pg, name, &phys);
        if (r < 0 || (r = pg_admin_db(pg, &db)) < 0)
                return r;
        const char *p[] = {pg->live_db};
        if ((r = db_query_value(db, "SELECT pg_database_size($1)", 1, p, &size)) < 0)
                return r;
        if (!(c.name = strdup(name)))
                return -ENOMEM;
        c.live_bytes = strtoll(size, NULL, 10);
        c.copied = c.live_bytes <= max_bytes;
        /* A copy left by a killed kernel under this name goes first. */
        if ((r = copy_drop(db, phys)) < 0 || (r = copy_role(pg, db, phys, &c.password)) < 0)
                return r;
        if (xasprintf(&create, "CREATE DATABASE %s OWNER %s TEMPLATE template0 ENCODING 'UTF8'", phys, phys) < 0 ||
            xasprintf(&revoke, "REVOKE ALL ON DATABASE %s FROM PUBLIC", phys) < 0)
                return -ENOMEM;
        if ((r = pg_sql(db, "creating a copy of the live data", create)) < 0 ||
            (r = pg_sql(db, "restricting a copy of the live data", revoke)) < 0 ||
            (c.copied && (r = copy_data(pg, phys, c.password)) < 0)) {
                (void)copy_drop(db, phys);
                return r;
        }
        *ret = c;
        c = (struct pg_live_copy){0};
        return 0;
}

int pg_live_copy_url(const struct pg *pg, const struct pg_live_copy *c, char **ret) {
        if (!pg || !c || !c->password)
                return -EINVAL;
        _cleanup_free_ char *phys = NULL;
        int r = copy_physical(pg, c->name, &phys);
        return r < 0 ? r : sandbox_url(phys, c->password, phys, ret);
}

int pg_live_copy_conninfo(const struct pg *pg, const struct pg_live_copy *c, char **ret) {
        if (!pg || !c || !c->password)
                return -EINVAL;
        _cleanup_free_ char *phys = NULL;
        int r = copy_physical(pg, c->name, &phys);
        return r < 0 ? r : conninfo_for(pg, phys, phys, c->password, ret);
}
