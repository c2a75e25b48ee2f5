/* Finding a container engine that works, running its commands, and the
 * Seed's container name. */
#include "container/container.h"

#include "base/crypto.h"
#include "base/fileio.h"
#include "base/proc.h"

#include <ctype.h>

#define ENGINE_OUTPUT_MAX (256u << 10)

void container_engine_done(struct container_engine *e) {
        free(e->path);
        *e = (struct container_engine){0};
}

const char *container_kind_name(enum container_kind k) {
        return k == CONTAINER_DOCKER ? "docker" : "podman";
}

/* The engines' environment: fixed, so no secret of the caller's reaches
 * them (and so neither their config nor `inspect`). */
static int engine_env(char ***ret) {
        _cleanup_strv_free_ char **env = NULL;
        static const char *const keep[] = {"HOME", "XDG_RUNTIME_DIR", "DOCKER_HOST", "CONTAINER_HOST"};
        int r = strv_push(&env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        if (r >= 0)
                r = strv_push(&env, "LANG=C.UTF-8");
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(keep); i++) {
                const char *v = getenv(keep[i]);
                if (v && strlen(v) < 4096)
                        r = strv_pushf(&env, "%s=%s", keep[i], v);
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(env);
        return 0;
}

int container_engine_exec(const struct container_engine *e, char *const *args, int in_fd, int out_fd,
                          int timeout_ms, char **ret_output) {
        _cleanup_strv_free_ char **argv = NULL, **env = NULL;
        int r = strv_push(&argv, e->path);
        for (char *const *a = args; r >= 0 && *a; a++)
                r = strv_push(&argv, *a);
        if (r < 0 || (r = engine_env(&env)) < 0)
                return r;
        struct proc_result res = {0};
        r = proc_run(&(struct proc_opts){.argv = argv, .envp = env, .stdin_fd = in_fd,
                                         .out_fd = ret_output ? -1 : out_fd, .timeout_ms = timeout_ms,
                                         .out_head = ENGINE_OUTPUT_MAX / 2, .out_tail = ENGINE_OUTPUT_MAX / 2},
                     &res);
        if (r < 0)
                return r;
        if (ret_output)
                *ret_output = TAKE_PTR(res.output);
        int code = res.exit_code;
        proc_result_done(&res);
        return code;
}

static char *find_program(const char *name) {
        static const char *const dirs[] = {"/usr/bin", "/usr/local/bin", "/bin", "/usr/sbin"};
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                char *p = path_join(dirs[i], name);
                if (p && access(p, X_OK) == 0)
                        return p;
                free(p);
        }
        return NULL;
}

void container_reason(const char *output, char *out, size_t n) {
        const char *pick = NULL, *last = NULL;
        size_t pick_len = 0, last_len = 0;
        for (const char *p = output ? output : ""; *p;) {
                size_t len = strcspn(p, "\r\n");
                if (len > 0 && memmem(p, len, "Error", 5)) {
                        pick = p;
                        pick_len = len;
                }
                if (strspn(p, " \t") < len) {
                        last = p;
                        last_len = len;
                }
                p += len;
                p += strspn(p, "\r\n");
        }
        if (!pick) {
                pick = last ? last : "";
                pick_len = last_len;
        }
        if (n > 0)
                snprintf(out, n, "%.*s", (int)(pick_len < n ? pick_len : n - 1), pick);
}

/* One engine: installed, and its `info` answers. */
static int try_engine(enum container_kind k, struct container_engine *ret, char **ret_why) {
        const char *name = container_kind_name(k);
        _cleanup_free_ char *path = find_program(name);
        if (!path)
                return errorf(-ENOENT, ret_why, "%s is not installed", name);
        struct container_engine e = {.kind = k, .path = path};
        char *info[] = {"info", "--format", k == CONTAINER_PODMAN ? "{{.Host.Security.Rootless}}" : "{{.ID}}", NULL};
        _cleanup_free_ char *out = NULL;
        int r = container_engine_exec(&e, info, -1, -1, 30 * 1000, &out);
        if (r != 0) {
                char line[200];
                container_reason(out, line, sizeof line);
                return errorf(-ENOENT, ret_why, "'%s info' failed%s%s", name, *line ? ": " : "", line);
        }
        e.rootless = k == CONTAINER_PODMAN ? startswith(out ? out : "", "true") : geteuid() != 0;
        e.path = TAKE_PTR(path);
        *ret = e;
        return 0;
}

int container_engine_detect(struct container_engine *ret, char **ret_why) {
        const char *want = getenv("SEED_CONTAINER_ENGINE");
        if (!strempty(want)) {
                if (streq(want, "podman"))
                        return try_engine(CONTAINER_PODMAN, ret, ret_why);
                if (streq(want, "docker"))
                        return try_engine(CONTAINER_DOCKER, ret, ret_why);
                return errorf(-ENOENT, ret_why, "SEED_CONTAINER_ENGINE=%.32s is not podman, docker or none", want);
        }
        _cleanup_free_ char *why_podman = NULL, *why_docker = NULL;
        if (try_engine(CONTAINER_PODMAN, ret, &why_podman) == 0)
                return 0;
        if (try_engine(CONTAINER_DOCKER, ret, &why_docker) == 0)
                return 0;
        return errorf(-ENOENT, ret_why, "%s; %s", why_podman ? why_podman : "podman does not work",
                      why_docker ? why_docker : "docker does not work");
}

int container_name(const char *seed_dir, char **ret) {
        char hash[SHA256_HEX_LEN + 1], base[33] = "";
        crypto_sha256_hex(seed_dir, strlen(seed_dir), hash);
        const char *slash = strrchr(seed_dir, '/');
        const char *folder = slash ? slash + 1 : seed_dir;
        size_t n = 0;
        for (const char *c = folder; *c && n < sizeof base - 1; c++)
                base[n++] = isalnum((unsigned char)*c) ? (char)tolower((unsigned char)*c) : '-';
        base[n] = 0;
        return xasprintf(ret, "seed-%s-%.8s", n ? base : "seed", hash);
}
