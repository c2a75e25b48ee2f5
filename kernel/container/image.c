/* The image a Seed runs in: built from the Seed's own Dockerfile with no
 * build context (so nothing from the folder can be copied in), tagged by the
 * Dockerfile's content hash (so a second start does not build again), over a
 * Debian base made from the mirror when the engine has none. */
#include "container/container.h"

#include "base/crypto.h"
#include "base/fileio.h"

#include <ctype.h>
#include <fcntl.h>
#include <sys/mman.h>

#define DOCKERFILE_MAX (64u << 10)
#define BUILD_TIMEOUT_MS (30 * 60 * 1000)
#define BASE_TIMEOUT_MS (15 * 60 * 1000)
#define MIRROR_DEFAULT "http://deb.debian.org/debian"

int container_image_tag(const char *dockerfile, size_t len, char **ret) {
        char hash[SHA256_HEX_LEN + 1];
        crypto_sha256_hex(dockerfile, len, hash);
        return xasprintf(ret, "localhost/seed:%.16s", hash);
}

static bool image_exists(const struct container_engine *e, const char *ref) {
        char *exists[] = {"image", "exists", (char *)ref, NULL};
        char *inspect[] = {"image", "inspect", "--format", "{{.Id}}", (char *)ref, NULL};
        _cleanup_free_ char *out = NULL;
        return container_engine_exec(e, e->kind == CONTAINER_PODMAN ? exists : inspect, -1, -1, 60 * 1000, &out) == 0;
}

static bool ref_char_ok(char c) {
        return isalnum((unsigned char)c) || strchr("._-/:@", c);
}

/* The image the Dockerfile starts FROM (the first FROM line), validated as
 * an image reference. Caller frees. */
static int dockerfile_from(const char *df, size_t len, char **ret) {
        const char *p = df, *end = df + len;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *le = nl ? nl : end;
                while (p < le && isspace((unsigned char)*p))
                        p++;
                if ((size_t)(le - p) > 5 && strncasecmp(p, "FROM", 4) == 0 && isspace((unsigned char)p[4])) {
                        p += 5;
                        while (p < le && isspace((unsigned char)*p))
                                p++;
                        const char *s = p;
                        while (p < le && ref_char_ok(*p))
                                p++;
                        if (p == s || p - s > 255 || (p < le && !isspace((unsigned char)*p)))
                                return -EINVAL;
                        char *r = strndup(s, (size_t)(p - s));
                        if (!r)
                                return -ENOMEM;
                        *ret = r;
                        return 0;
                }
                p = le + 1;
        }
        return -EINVAL;
}

/* A Debian suite named by a base reference ("docker.io/library/debian:
 * bookworm", "debian:bookworm-slim" → "bookworm"), or NULL. */
static char *debian_suite(const char *ref) {
        const char *tag = NULL;
        if (startswith(ref, "docker.io/library/debian:"))
                tag = ref + strlen("docker.io/library/debian:");
        else if (startswith(ref, "debian:"))
                tag = ref + strlen("debian:");
        if (!tag || !*tag)
                return NULL;
        size_t n = strcspn(tag, "-@");
        for (size_t i = 0; i < n; i++)
                if (!islower((unsigned char)tag[i]))
                        return NULL;
        return n ? strndup(tag, n) : NULL;
}

static bool mirror_ok(const char *u) {
        if (!startswith(u, "http://") && !startswith(u, "https://"))
                return false;
        for (const char *c = u; *c; c++)
                if (!isalnum((unsigned char)*c) && !strchr(":/._-~", *c))
                        return false;
        return strlen(u) < 256;
}

/* The machine's Debian mirror: the first main archive URI in apt's
 * sources (deb822 debian.sources or sources.list), else deb.debian.org. */
static char *debian_mirror(void) {
        static const char *const files[] = {"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"};
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                _cleanup_free_ char *data = NULL;
                if (read_file(files[i], 256u << 10, &data, NULL) < 0)
                        continue;
                for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
                        char *u = NULL;
                        if (startswith(line, "URIs:"))
                                u = line + 5;
                        else if (startswith(line, "deb "))
                                u = line + 4;
                        if (!u)
                                continue;
                        u += strspn(u, " \t");
                        if (*u == '[' && strchr(u, ']')) { /* deb [options] URI */
                                u = strchr(u, ']') + 1;
                                u += strspn(u, " \t");
                        }
                        u[strcspn(u, " \t")] = 0;
                        if (mirror_ok(u) && !strstr(u, "security"))
                                return strdup(u);
                }
        }
        return strdup(MIRROR_DEFAULT);
}

/* Prints the tail of a failed step's output. */
static void print_tail(const char *out) {
        if (!out)
                return;
        size_t n = strlen(out);
        const char *t = n > 2000 ? out + n - 2000 : out;
        fprintf(stderr, "%s%s", t, n && out[n - 1] == '\n' ? "" : "\n");
}

static int make_debian_base(const struct container_engine *e, const char *ref) {
        _cleanup_free_ char *suite = debian_suite(ref), *mirror = debian_mirror();
        if (!suite || !mirror || e->kind != CONTAINER_PODMAN || access("/usr/bin/mmdebstrap", X_OK) < 0) {
                fprintf(stderr, "seed: the engine has no image %s; the build will try to pull it\n", ref);
                return 0;
        }
        fprintf(stderr, "seed: %s has no Debian base image; making %s from the mirror %s (mmdebstrap, about a "
                        "minute)\n",
                container_kind_name(e->kind), ref, mirror);
        int64_t t0 = now_ms();
        /* mmdebstrap's tarball straight into `import`, arguments passed as
         * positional parameters (no quoting). mmdebstrap's errors go to
         * what we show on failure (fd 3: the captured output, not the
         * pipe); when it fails, whatever `import` made of the cut tarball
         * is removed (dash has no pipefail). A second try: a mirror's
         * hiccup. */
        char *sh[] = {"/bin/sh", "-c",
                      "exec 3>&1; failed=$(mktemp) || exit 1; for try in 1 2; do : >\"$failed\"; "
                      "{ /usr/bin/mmdebstrap --quiet --variant=minbase \"$1\" - \"$2\" 2>&3 || "
                      "echo \"mmdebstrap exit $?\" >\"$failed\"; } | \"$3\" import - \"$4\"; "
                      "if [ ! -s \"$failed\" ] && \"$3\" image exists \"$4\"; then rm -f \"$failed\"; exit 0; fi; "
                      "cat \"$failed\"; \"$3\" rmi -f \"$4\" >/dev/null 2>&1; echo \"(try $try failed)\"; done; "
                      "rm -f \"$failed\"; exit 1",
                      "sh", suite, mirror, e->path, (char *)ref, NULL};
        struct container_engine shell = {.kind = e->kind, .path = "/bin/sh"};
        _cleanup_free_ char *out = NULL;
        int r = container_engine_exec(&shell, sh + 1, -1, -1, BASE_TIMEOUT_MS, &out);
        if (r != 0 || !image_exists(e, ref)) {
                fprintf(stderr, "seed: making the base image failed (mmdebstrap --variant=minbase %s - %s | %s import - "
                                "%s):\n",
                        suite, mirror, container_kind_name(e->kind), ref);
                print_tail(out);
                return -EIO;
        }
        fprintf(stderr, "seed: base image %s made in %lld s\n", ref, (long long)((now_ms() - t0) / 1000));
        return 0;
}

int container_image_ensure(const struct container_engine *e, const char *dockerfile, size_t len, char **ret_tag) {
        if (len > DOCKERFILE_MAX)
                return -EFBIG;
        _cleanup_free_ char *tag = NULL, *from = NULL;
        int r = container_image_tag(dockerfile, len, &tag);
        if (r < 0)
                return r;
        if (image_exists(e, tag)) {
                *ret_tag = TAKE_PTR(tag);
                return 0;
        }
        if (dockerfile_from(dockerfile, len, &from) < 0) {
                fprintf(stderr, "seed: the Dockerfile has no valid FROM line\n");
                return -EINVAL;
        }
        if (!image_exists(e, from) && (r = make_debian_base(e, from)) < 0)
                return r;
        _cleanup_close_ int mfd = memfd_create("Dockerfile", MFD_CLOEXEC);
        if (mfd < 0)
                return -errno;
        if (write(mfd, dockerfile, len) != (ssize_t)len || lseek(mfd, 0, SEEK_SET) < 0)
                return -EIO;
        fprintf(stderr, "seed: building the image %s from the Seed's Dockerfile (no build context; a few minutes the "
                        "first time)\n",
                tag);
        int64_t t0 = now_ms();
        /* --pull=never: the base is the one made above, or one the engine has. */
        char *build[] = {"build", "--pull=never", "-t", tag, "-", NULL};
        _cleanup_free_ char *out = NULL;
        r = container_engine_exec(e, build, mfd, -1, BUILD_TIMEOUT_MS, &out);
        if (r != 0) {
                fprintf(stderr, "seed: building the image failed:\n");
                print_tail(out);
                return -EIO;
        }
        fprintf(stderr, "seed: image %s built in %lld s\n", tag, (long long)((now_ms() - t0) / 1000));
        *ret_tag = TAKE_PTR(tag);
        return 0;
}
