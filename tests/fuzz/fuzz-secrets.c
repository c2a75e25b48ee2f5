/* fuzz-secrets.c — the secrets parsers (kernel/secrets) on arbitrary bytes.
 *
 * The first byte chooses:
 *   0  secrets_read_fd on a pipe (the CLI → kernel wire format)
 *   1  secrets_read_fd on a memfd
 *   2  secrets_add_env_file on /proc/self/fd/N of a memfd
 *   3  secrets_add_arg on the bytes as one argument
 * Every accepted set must obey the limits, survive a write/read round trip
 * unchanged, and an error message must never echo an invalid name (it may
 * be a piece of a secret). */
#include "secrets/secrets.h"

#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

static void write_all(int fd, const uint8_t *data, size_t size) {
        while (size > 0) {
                ssize_t k = write(fd, data, size);
                if (k < 0 && errno == EINTR)
                        continue;
                check(k > 0);
                data += k;
                size -= (size_t)k;
        }
}

static int memfd_with(const uint8_t *data, size_t size) {
        int fd = memfd_create("fuzz-secrets", MFD_CLOEXEC);
        check(fd >= 0);
        write_all(fd, data, size);
        check(lseek(fd, 0, SEEK_SET) == 0);
        return fd;
}

static void check_limits(const struct secrets *s) {
        size_t n = secrets_count(s);
        check(n <= SECRETS_MAX);
        for (size_t i = 0; i < n; i++) {
                const char *name = secrets_name(s, i);
                check(name && secrets_valid_name(name));
                const char *v = secrets_get(s, name);
                check(v && strlen(v) <= SECRETS_VALUE_MAX);
                for (size_t k = 0; k < i; k++)
                        check(!streq(secrets_name(s, k), name));
        }
        check(!secrets_name(s, n));
}

/* Writing and reading back gives the same names and values. */
static void check_roundtrip(const struct secrets *s) {
        int fd = memfd_create("fuzz-secrets-rt", MFD_CLOEXEC);
        check(fd >= 0);
        check(secrets_write_fd(s, fd) == 0);
        check(lseek(fd, 0, SEEK_SET) == 0);
        struct secrets *t = NULL;
        check(secrets_new(&t) == 0);
        check(secrets_read_fd(t, fd) == 0);
        close(fd);
        check(secrets_count(t) == secrets_count(s));
        for (size_t i = 0; i < secrets_count(s); i++) {
                const char *name = secrets_name(s, i);
                check(streq(secrets_name(t, i), name));
                check(streq(secrets_get(t, name), secrets_get(s, name)));
        }
        secrets_free(t);
}

static void fuzz_read_fd(const uint8_t *data, size_t size, bool use_pipe) {
        int fd;
        if (use_pipe && size <= 60000) {
                int p[2];
                check(pipe2(p, O_CLOEXEC) == 0);
                (void)fcntl(p[1], F_SETPIPE_SZ, 65536);
                write_all(p[1], data, size);
                close(p[1]);
                fd = p[0];
        } else
                fd = memfd_with(data, size);
        struct secrets *s = NULL;
        check(secrets_new(&s) == 0);
        int r = secrets_read_fd(s, fd);
        close(fd);
        check(r == 0 || r == -EBADMSG || r == -EINVAL || r == -E2BIG || r == -ENOMEM);
        /* Everything it holds, even after an error, passed validation. */
        check_limits(s);
        if (r == 0) {
                /* Well-formed: NUL-terminated NAME=VALUE records only. */
                check(size == 0 || data[size - 1] == 0);
                check_roundtrip(s);
        }
        secrets_free(s);
}

/* An invalid name that no fixed message text could contain by chance: it
 * has a byte (like base64's '+') that the messages never use. */
static bool unmistakable(const char *name) {
        if (secrets_valid_name(name))
                return false;
        for (const unsigned char *p = (const unsigned char *)name; *p; p++)
                if (*p >= 0x80 || *p < 0x20 || strchr("+@!~^%&{}|", *p))
                        return true;
        return false;
}

/* The message contains no invalid name of the input (the text before '='
 * on a line). */
static void check_error_hides_bad_names(const char *err, const char *text) {
        char *copy = strdup(text);
        check(copy);
        for (char *line = copy, *next; line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                char *eq = strchr(line, '=');
                if (!eq)
                        continue;
                *eq = 0;
                char *name = line;
                while (*name == ' ' || *name == '\t')
                        name++;
                if (strncmp(name, "export ", 7) == 0)
                        name += 7;
                while (*name == ' ' || *name == '\t')
                        name++;
                char *e = name + strlen(name);
                while (e > name && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                        *--e = 0;
                /* Long enough not to be a chance match of the message's own words. */
                if (*name && *name != '#' && unmistakable(name))
                        check(!strstr(err, name));
        }
        free(copy);
}

static void fuzz_env_file(const uint8_t *data, size_t size) {
        int fd = memfd_with(data, size);
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        struct secrets *s = NULL;
        char *err = NULL;
        check(secrets_new(&s) == 0);
        int r = secrets_add_env_file(s, path, &err);
        close(fd);
        check_limits(s);
        if (r == 0) {
                check(!err);
                check(!memchr(data, 0, size));
                for (size_t i = 0; i < secrets_count(s); i++) {
                        const char *v = secrets_get(s, secrets_name(s, i));
                        check(!strchr(v, '\n'));
                }
                check_roundtrip(s);
        } else {
                check(r == -EINVAL || r == -E2BIG || r == -ENOMEM || r == -EFBIG);
                check(r == -ENOMEM || (err && startswith(err, path)));
                char *text = malloc(size + 1);
                check(text);
                memcpy(text, data, size);
                text[size] = 0;
                check_error_hides_bad_names(err, text);
                free(text);
        }
        free(err);
        secrets_free(s);
}

static void fuzz_arg(const uint8_t *data, size_t size) {
        char *arg = malloc(size + 1);
        check(arg);
        memcpy(arg, data, size);
        arg[size] = 0;
        struct secrets *s = NULL;
        char *err = NULL;
        check(secrets_new(&s) == 0);
        int r = secrets_add_arg(s, arg, &err);
        check_limits(s);
        if (r == 0) {
                check(secrets_count(s) == 1);
                const char *eq = strchr(arg, '=');
                if (eq)
                        check(streq(secrets_get(s, secrets_name(s, 0)), eq + 1));
        } else {
                check(r == -ENOMEM || err);
                arg[strcspn(arg, "=")] = 0;
                if (err && *arg && unmistakable(arg))
                        check(!strstr(err, arg));
        }
        free(err);
        free(arg);
        secrets_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        uint8_t mode = data[0] % 4;
        data++;
        size--;
        switch (mode) {
        case 0:
        case 1:
                fuzz_read_fd(data, size, mode == 0);
                break;
        case 2:
                fuzz_env_file(data, size);
                break;
        case 3:
                fuzz_arg(data, size);
                break;
        }
        return 0;
}
