/* The container itself: its limits, the hardened `run` command line (a
 * table of flags), starting, stopping and waiting for it, and reading back
 * the limits its cgroup really has (an engine may ignore them: rootless
 * podman on cgroup v1 does, silently). */
#include "container/container.h"

#include "base/fileio.h"

#include <ctype.h>
#include <inttypes.h>
#include <sys/resource.h>

#define DEFAULT_MEMORY "8g"
#define DEFAULT_PIDS 4096
#define TMP_SIZE "1g"
#define ENGINE_TIMEOUT_MS (120 * 1000)
#define CGROUP_UNLIMITED (UINT64_C(1) << 60)

/* ---- limits ---- */

/* "8g", "512m", "1073741824": digits and an optional b/k/m/g suffix. */
static int parse_size(const char *s, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || !isdigit((unsigned char)*s))
                return -EINVAL;
        uint64_t mul = 1;
        switch (tolower((unsigned char)*end)) {
        case 0: break;
        case 'b': mul = 1; end++; break;
        case 'k': mul = UINT64_C(1) << 10; end++; break;
        case 'm': mul = UINT64_C(1) << 20; end++; break;
        case 'g': mul = UINT64_C(1) << 30; end++; break;
        default: return -EINVAL;
        }
        if (*end || v == 0 || v > UINT64_MAX / mul)
                return -EINVAL;
        *ret = v * mul;
        return 0;
}

/* "1", "1.5", "0.25": at most 3 decimals, more than 0. */
static int parse_cpus(const char *s, uint64_t *ret_millis) {
        uint64_t whole = 0, frac = 0;
        int digits = 0;
        const char *p = s;
        if (!isdigit((unsigned char)*p))
                return -EINVAL;
        for (; isdigit((unsigned char)*p); p++) {
                whole = whole * 10 + (uint64_t)(*p - '0');
                if (whole > 4096)
                        return -EINVAL;
        }
        if (*p == '.')
                for (p++; isdigit((unsigned char)*p); p++, digits++) {
                        if (digits == 3)
                                return -EINVAL;
                        frac = frac * 10 + (uint64_t)(*p - '0');
                }
        if (*p)
                return -EINVAL;
        for (; digits < 3; digits++)
                frac *= 10;
        uint64_t m = whole * 1000 + frac;
        if (m == 0)
                return -EINVAL;
        *ret_millis = m;
        return 0;
}

int container_limits_from_env(struct container_limits *ret, char **ret_error) {
        struct container_limits l = {0};
        const char *mem = getenv("SEED_MEMORY"), *cpus = getenv("SEED_CPUS"), *pids = getenv("SEED_PIDS_LIMIT");
        if (strempty(mem))
                mem = DEFAULT_MEMORY;
        if (strlen(mem) >= sizeof l.memory || parse_size(mem, &l.memory_bytes) < 0 || l.memory_bytes < (64u << 20))
                return errorf(-EINVAL, ret_error, "SEED_MEMORY=%.32s is not a size of at least 64m (e.g. 8g, 512m)",
                              mem);
        snprintf(l.memory, sizeof l.memory, "%s", mem);
        if (strempty(cpus)) {
                long n = sysconf(_SC_NPROCESSORS_ONLN);
                l.cpus_millis = (uint64_t)(n >= 2 ? n / 2 : 1) * 1000;
                snprintf(l.cpus, sizeof l.cpus, "%u", (unsigned)(l.cpus_millis / 1000));
        } else {
                if (strlen(cpus) >= sizeof l.cpus || parse_cpus(cpus, &l.cpus_millis) < 0)
                        return errorf(-EINVAL, ret_error, "SEED_CPUS=%.32s is not a number of CPUs (e.g. 1, 1.5)",
                                      cpus);
                snprintf(l.cpus, sizeof l.cpus, "%s", cpus);
        }
        l.pids = DEFAULT_PIDS;
        if (!strempty(pids)) {
                char *end;
                errno = 0;
                long v = strtol(pids, &end, 10);
                if (errno || *end || end == pids || v < 64 || v > 4194304)
                        return errorf(-EINVAL, ret_error, "SEED_PIDS_LIMIT=%.32s is not a number from 64 to 4194304",
                                      pids);
                l.pids = v;
        }
        *ret = l;
        return 0;
}

/* ---- the command line ---- */

/* The hardening every Seed's container gets, per engine (NULL: the engine
 * needs no such flag). */
static const struct run_flag {
        const char *podman, *docker;
        const char *why;
} hardening[] = {
        {"--cap-drop=ALL", "--cap-drop=ALL", "no capability at all"},
        {"--security-opt=no-new-privileges", "--security-opt=no-new-privileges", "nothing inside gains privilege"},
        {"--read-only", "--read-only", "the image cannot be changed from inside"},
        {"--read-only-tmpfs=false", NULL, "podman's own tmpfs mounts are not size-capped: only ours below"},
        {"--tmpfs=/tmp:rw,nosuid,nodev,size=" TMP_SIZE ",mode=1777", "--tmpfs=/tmp:rw,nosuid,nodev,size=" TMP_SIZE
                                                                    ",mode=1777",
         "the one writable place besides /seed, size-capped"},
        {"--init", "--init", "an init reaps orphans and forwards the stop signal"},
        {"--security-opt=unmask=/proc/*", "--security-opt=systempaths=unconfined",
         "bubblewrap mounts a /proc of its own, which masked paths forbid"},
        {"--pull=never", "--pull=never", "only the image built here"},
        {"--rm", "--rm", "nothing of a stopped container is kept: the Seed's state is in its folder"},
        {"--stop-timeout=40", "--stop-timeout=40", "the supervisor inside gives the kernel 30 s"},
        {"--workdir=/seed", "--workdir=/seed", "the Seed's folder"},
        {"--env=SEED_IN_CONTAINER=1", "--env=SEED_IN_CONTAINER=1",
         "the kernel refuses connections from inside its own container"},
};

static bool apparmor_active(void) {
        _cleanup_free_ char *v = NULL;
        return read_file("/sys/module/apparmor/parameters/enabled", 64, &v, NULL) == 0 && v[0] == 'Y';
}

/* --ulimit from the caller's own limits: an engine's defaults may exceed
 * the host's hard limits (podman's open files do on our machines), and runc
 * then refuses to start. Processes per uid are capped at the pids limit too
 * (the cgroup bounds them anyway; runc refuses values above what the host
 * allows it to set). */
static int push_ulimit(char ***args, const char *name, int resource, long cap) {
        struct rlimit rl;
        if (getrlimit(resource, &rl) < 0)
                return -errno;
        long long soft = rl.rlim_cur == RLIM_INFINITY ? -1 : (long long)rl.rlim_cur;
        long long hard = rl.rlim_max == RLIM_INFINITY ? -1 : (long long)rl.rlim_max;
        if (cap > 0 && (hard < 0 || hard > cap))
                hard = cap;
        if (hard >= 0 && (soft < 0 || soft > hard))
                soft = hard;
        return strv_pushf(args, "--ulimit=%s=%lld:%lld", name, soft, hard);
}

int container_run_args(const struct container_engine *e, const struct container_run *o, char ***ret) {
        if (!o->name || !o->image || !o->seed_dir || !o->seed_binary || !o->profile || !o->limits || o->uid == 0 ||
            o->port <= 0 || o->port > 65535 || !o->publish_ip || strchr(o->seed_dir, ',') || strchr(o->seed_dir, ':'))
                return -EINVAL;
        bool podman = e->kind == CONTAINER_PODMAN;
        _cleanup_strv_free_ char **a = NULL;
        int r = strv_push(&a, "run");
        if (r >= 0)
                r = strv_push(&a, "--detach");
        if (r >= 0)
                r = strv_pushf(&a, "--name=%s", o->name);
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(hardening); i++) {
                const char *f = podman ? hardening[i].podman : hardening[i].docker;
                if (f)
                        r = strv_push(&a, f);
        }
        if (r >= 0)
                r = strv_pushf(&a, "--security-opt=seccomp=%s", o->profile);
        if (r >= 0 && apparmor_active()) /* only where it is active: its docker-default forbids mount */
                r = strv_push(&a, "--security-opt=apparmor=unconfined");
        if (r >= 0)
                r = strv_pushf(&a, "--user=%u:%u", (unsigned)o->uid, (unsigned)o->gid);
        if (r >= 0 && podman && e->rootless) {
                /* The owner's uid inside is theirs outside; connections from
                 * the host keep their own address (not the container's loopback). */
                r = strv_push(&a, "--userns=keep-id");
                if (r >= 0)
                        r = strv_push(&a, "--network=slirp4netns:port_handler=slirp4netns");
        }
        if (r >= 0)
                r = strv_pushf(&a, "--memory=%s", o->limits->memory);
        if (r >= 0)
                r = strv_pushf(&a, "--memory-swap=%s", o->limits->memory); /* no swap beyond the limit */
        if (r >= 0)
                r = strv_pushf(&a, "--cpus=%s", o->limits->cpus);
        if (r >= 0)
                r = strv_pushf(&a, "--pids-limit=%ld", o->limits->pids);
        /* The engine's defaults may exceed the host's hard limits. */
        if (r >= 0)
                r = push_ulimit(&a, "nofile", RLIMIT_NOFILE, 0);
        if (r >= 0)
                r = push_ulimit(&a, "nproc", RLIMIT_NPROC, o->limits->pids);
        if (r >= 0)
                r = strv_pushf(&a, "--publish=%s:%d:%d", o->publish_ip, o->port, o->port);
        if (r >= 0)
                r = strv_pushf(&a, "--volume=%s:/seed:rw", o->seed_dir);
        if (r >= 0)
                r = strv_pushf(&a, "--volume=%s:/usr/local/bin/seed:ro", o->seed_binary);
        if (r >= 0 && !podman && o->passwd && o->group) {
                r = strv_pushf(&a, "--volume=%s:/etc/passwd:ro", o->passwd);
                if (r >= 0)
                        r = strv_pushf(&a, "--volume=%s:/etc/group:ro", o->group);
        }
        if (r >= 0)
                r = strv_pushf(&a, "--label=dev.seed.dir=%s", o->seed_dir);
        if (r >= 0)
                r = strv_push(&a, o->image);
        /* Inside: the native supervisor, listening on the container's side of
         * the published port. */
        char *inner[] = {"/usr/local/bin/seed", "run", "--native", "--in-container", "--dir", "/seed", NULL};
        for (size_t i = 0; r >= 0 && inner[i]; i++)
                r = strv_push(&a, inner[i]);
        if (r >= 0)
                r = strv_pushf(&a, "--addr=0.0.0.0:%d", o->port);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(a);
        return 0;
}

int container_start(const struct container_engine *e, const struct container_run *o, char **ret_error) {
        _cleanup_strv_free_ char **args = NULL;
        int r = container_run_args(e, o, &args);
        if (r < 0)
                return r;
        /* A stopped container of this name (the engine died, say) is in the way. */
        char *rm[] = {"rm", "--force", (char *)o->name, NULL};
        _cleanup_free_ char *ignored = NULL, *out = NULL;
        if (!container_running(e, o->name))
                (void)container_engine_exec(e, rm, -1, -1, ENGINE_TIMEOUT_MS, &ignored);
        r = container_engine_exec(e, args, -1, -1, ENGINE_TIMEOUT_MS, &out);
        if (r == 0)
                return 0;
        if (ret_error) {
                char line[400];
                container_reason(out, line, sizeof line);
                *ret_error = strdup(*line ? line : "the engine gave no reason");
        }
        return r < 0 ? r : -EIO;
}

bool container_running(const struct container_engine *e, const char *name) {
        char *inspect[] = {"container", "inspect", "--format", "{{.State.Running}}", (char *)name, NULL};
        _cleanup_free_ char *out = NULL;
        return container_engine_exec(e, inspect, -1, -1, ENGINE_TIMEOUT_MS, &out) == 0 && out &&
               startswith(out, "true");
}

int container_stop(const struct container_engine *e, const char *name, int grace_s) {
        char t[16];
        snprintf(t, sizeof t, "%d", grace_s);
        char *stop[] = {"stop", "--time", t, (char *)name, NULL};
        _cleanup_free_ char *out = NULL;
        int r = container_engine_exec(e, stop, -1, -1, (grace_s + 60) * 1000, &out);
        return r == 0 ? 0 : r < 0 ? r : -EIO;
}

int container_wait(const struct container_engine *e, const char *name) {
        char *wait[] = {"wait", (char *)name, NULL};
        _cleanup_free_ char *out = NULL;
        int r = container_engine_exec(e, wait, -1, -1, 0, &out);
        if (r != 0)
                return r < 0 ? r : -EIO;
        long code = out ? strtol(out, NULL, 10) : 0;
        return code >= 0 && code <= 255 ? (int)code : 1;
}

/* ---- the limits in force ---- */

static int read_u64(const char *dir, const char *file, uint64_t *ret) {
        _cleanup_free_ char *p = path_join(dir, file), *v = NULL;
        if (!p)
                return -ENOMEM;
        int r = read_file(p, 128, &v, NULL);
        if (r < 0)
                return r;
        if (startswith(v, "max")) {
                *ret = 0;
                return 0;
        }
        char *end;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        if (errno || end == v)
                return -EBADMSG;
        *ret = n >= CGROUP_UNLIMITED ? 0 : n;
        return 0;
}

static bool controller_has(const char *list, const char *name) {
        size_t n = strlen(name);
        for (const char *p = list; p && *p;) {
                size_t len = strcspn(p, ",");
                if (len == n && strncmp(p, name, n) == 0)
                        return true;
                p += len + (p[len] == ',');
        }
        return false;
}

int container_read_cgroup(const struct container_engine *e, const char *name, struct container_cgroup *ret) {
        char *inspect[] = {"container", "inspect", "--format", "{{.State.Pid}}", (char *)name, NULL};
        _cleanup_free_ char *out = NULL, *cg = NULL, *path = NULL;
        int r = container_engine_exec(e, inspect, -1, -1, ENGINE_TIMEOUT_MS, &out);
        long pid = r == 0 && out ? strtol(out, NULL, 10) : 0;
        if (pid <= 1)
                return -ESRCH;
        char p[64];
        snprintf(p, sizeof p, "/proc/%ld/cgroup", pid);
        if ((r = read_file(p, 64u << 10, &cg, NULL)) < 0)
                return r;
        struct container_cgroup c = {0};
        bool unified = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
        for (char *save = NULL, *line = strtok_r(cg, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *ctl = strchr(line, ':'), *rel = ctl ? strchr(ctl + 1, ':') : NULL;
                if (!rel || strstr(rel, "..") || rel[1] != '/')
                        continue;
                *rel++ = 0;
                ctl++;
                _cleanup_free_ char *dir = NULL;
                if (*ctl == 0 && !unified)
                        continue; /* hybrid: the v1 controllers hold the limits */
                if (*ctl == 0) { /* v2: one hierarchy */
                        if (xasprintf(&dir, "/sys/fs/cgroup%s", rel) < 0)
                                return -ENOMEM;
                        (void)read_u64(dir, "memory.max", &c.memory_bytes);
                        uint64_t pids = 0;
                        if (read_u64(dir, "pids.max", &pids) == 0)
                                c.pids = (long)pids;
                        _cleanup_free_ char *cpu = NULL, *cpup = path_join(dir, "cpu.max");
                        unsigned long long quota = 0, period = 0;
                        if (cpup && read_file(cpup, 128, &cpu, NULL) == 0 &&
                            sscanf(cpu, "%llu %llu", &quota, &period) == 2 && period)
                                c.cpus_millis = quota * 1000 / period;
                        continue;
                }
                if (xasprintf(&dir, "/sys/fs/cgroup/%s%s", ctl, rel) < 0)
                        return -ENOMEM;
                if (controller_has(ctl, "memory"))
                        (void)read_u64(dir, "memory.limit_in_bytes", &c.memory_bytes);
                if (controller_has(ctl, "pids")) {
                        uint64_t pids = 0;
                        if (read_u64(dir, "pids.max", &pids) == 0)
                                c.pids = (long)pids;
                }
                if (controller_has(ctl, "cpu")) {
                        _cleanup_free_ char *q = NULL, *qp = path_join(dir, "cpu.cfs_quota_us");
                        uint64_t period = 0;
                        long long quota = 0;
                        if (qp && read_file(qp, 128, &q, NULL) == 0 && sscanf(q, "%lld", &quota) == 1 && quota > 0 &&
                            read_u64(dir, "cpu.cfs_period_us", &period) == 0 && period)
                                c.cpus_millis = (uint64_t)quota * 1000 / period;
                }
        }
        *ret = c;
        return 0;
}
