#include "secrets/secrets.h"
#include "base/buf.h"
#include "base/fileio.h"

#include <ctype.h>

struct secret {
        char *name, *value;
};

struct secrets {
        struct secret *items;
        size_t n;
};

int secrets_new(struct secrets **ret) {
        struct secrets *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

void secrets_free(struct secrets *s) {
        if (!s)
                return;
        for (size_t i = 0; i < s->n; i++) {
                free(s->items[i].name);
                secure_zero(s->items[i].value, strlen(s->items[i].value));
                free(s->items[i].value);
        }
        free(s->items);
        free(s);
}

bool secrets_valid_name(const char *name) {
        size_t len = strlen(name);
        if (len == 0 || len > SECRETS_NAME_MAX || isdigit((unsigned char)name[0]))
                return false;
        for (const char *p = name; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '_')
                        return false;
        return true;
}

int secrets_set(struct secrets *s, const char *name, const char *value) {
        if (!secrets_valid_name(name))
                return -EINVAL;
        if (strlen(value) > SECRETS_VALUE_MAX)
                return -E2BIG;
        char *v = strdup(value);
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < s->n; i++)
                if (streq(s->items[i].name, name)) {
                        secure_zero(s->items[i].value, strlen(s->items[i].value));
                        free(s->items[i].value);
                        s->items[i].value = v;
                        return 0;
                }
        if (s->n >= SECRETS_MAX) {
                free(v);
                return -E2BIG;
        }
        struct secret *items = realloc(s->items, (s->n + 1) * sizeof(*items));
        char *nm = strdup(name);
        if (!items || !nm) {
                if (items)
                        s->items = items;
                free(v);
                free(nm);
                return -ENOMEM;
        }
        s->items = items;
        s->items[s->n++] = (struct secret){nm, v};
        return 0;
}

const char *secrets_get(const struct secrets *s, const char *name) {
        for (size_t i = 0; s && i < s->n; i++)
                if (streq(s->items[i].name, name))
                        return s->items[i].value;
        return NULL;
}

size_t secrets_count(const struct secrets *s) { return s ? s->n : 0; }
const char *secrets_name(const struct secrets *s, size_t i) { return i < s->n ? s->items[i].name : NULL; }

/* Swaps the contents of two sets (the structs stay where they are). */
static void secrets_swap(struct secrets *a, struct secrets *b) {
        struct secrets t = *a;
        *a = *b;
        *b = t;
}

int secrets_merge(struct secrets *s, const struct secrets *from) {
        _cleanup_(secrets_freep) struct secrets *next = NULL;
        int r = secrets_new(&next);
        for (size_t i = 0; r >= 0 && i < s->n; i++)
                r = secrets_set(next, s->items[i].name, s->items[i].value);
        for (size_t i = 0; r >= 0 && from && i < from->n; i++)
                r = secrets_set(next, from->items[i].name, from->items[i].value);
        if (r < 0)
                return r;
        secrets_swap(s, next); /* next now holds the old ones, wiped as it is freed */
        return 0;
}

static int set_or_explain(struct secrets *s, const char *name, const char *value, const char *where,
                          char **ret_error) {
        int r = secrets_set(s, name, value);
        /* An invalid name is not echoed: it may be a piece of a secret (a
         * base64 line of a multi-line key ends in '='). */
        if (r == -EINVAL)
                (void)xasprintf(ret_error, "%s: not a valid variable name (NAME=VALUE, NAME is [A-Za-z_][A-Za-z0-9_]*)",
                                where);
        else if (r == -E2BIG)
                (void)xasprintf(ret_error, "%s: too many secrets or value of '%s' too long (max %d bytes)", where,
                                name, SECRETS_VALUE_MAX);
        return r;
}

int secrets_add_arg(struct secrets *s, const char *arg, char **ret_error) {
        const char *eq = strchr(arg, '=');
        if (!eq) {
                const char *v = getenv(arg);
                if (!secrets_valid_name(arg)) {
                        /* Not echoed: it may be a value typed without its name. */
                        (void)xasprintf(ret_error, "-e: not a valid variable name (NAME or NAME=VALUE)");
                        return -EINVAL;
                }
                if (!v) {
                        (void)xasprintf(ret_error, "-e %s: the variable is not set in this shell", arg);
                        return -ENOENT;
                }
                return set_or_explain(s, arg, v, "-e", ret_error);
        }
        _cleanup_free_ char *name = strndup(arg, (size_t)(eq - arg));
        if (!name)
                return -ENOMEM;
        return set_or_explain(s, name, eq + 1, "-e", ret_error);
}

static char *trim(char *p) {
        while (*p == ' ' || *p == '\t')
                p++;
        char *e = p + strlen(p);
        while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                *--e = 0;
        return p;
}

int secrets_add_env_file(struct secrets *s, const char *path, char **ret_error) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_file(path, 1 << 20, &data, &len);
        if (r < 0) {
                (void)xasprintf(ret_error, "%s: %s", path, r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
                return r;
        }
        if (memchr(data, 0, len)) {
                /* A NUL would silently cut a value short. */
                secure_zero(data, len);
                (void)xasprintf(ret_error, "%s: contains a NUL byte", path);
                return -EINVAL;
        }
        int lineno = 0;
        char *save = NULL;
        for (char *line = data; line; line = save) {
                save = strchr(line, '\n');
                if (save)
                        *save++ = 0;
                lineno++;
                char *p = trim(line);
                if (!*p || *p == '#')
                        continue;
                if (startswith(p, "export "))
                        p = trim(p + 7);
                char *eq = strchr(p, '=');
                char where[512];
                snprintf(where, sizeof where, "%s:%d", path, lineno);
                if (!eq) {
                        (void)xasprintf(ret_error, "%s: expected NAME=VALUE", where);
                        r = -EINVAL;
                        break;
                }
                *eq = 0;
                char *name = trim(p), *value = trim(eq + 1);
                size_t vl = strlen(value);
                if (vl >= 2 && (value[0] == '"' || value[0] == '\'') && value[vl - 1] == value[0]) {
                        value[vl - 1] = 0;
                        value++;
                }
                r = set_or_explain(s, name, value, where, ret_error);
                if (r < 0)
                        break;
        }
        /* All of it: parsing cut it into NUL-separated pieces. */
        secure_zero(data, len);
        return r < 0 ? r : 0;
}

int secrets_write_fd(const struct secrets *s, int fd) {
        for (size_t i = 0; i < s->n; i++) {
                const char *parts[] = {s->items[i].name, "=", s->items[i].value};
                for (size_t k = 0; k < 3; k++) {
                        const char *p = parts[k];
                        size_t len = strlen(p) + (k == 2); /* the value carries the NUL */
                        while (len > 0) {
                                ssize_t w = write(fd, p, len);
                                if (w < 0) {
                                        if (errno == EINTR)
                                                continue;
                                        return -errno;
                                }
                                p += w;
                                len -= (size_t)w;
                        }
                }
        }
        return 0;
}

/* Like buf_append(), but growing never leaves a copy of the secrets behind
 * in freed memory (realloc() may move the data without wiping it). */
static int append_wiped(struct buf *b, const char *data, size_t len) {
        if (len > b->max || b->len > b->max - len)
                return -E2BIG;
        if (b->len + len + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 4096;
                while (cap < b->len + len + 1)
                        cap *= 2;
                char *d = malloc(cap);
                if (!d)
                        return -ENOMEM;
                if (b->data) {
                        memcpy(d, b->data, b->len);
                        secure_zero(b->data, b->cap);
                        free(b->data);
                }
                b->data = d;
                b->cap = cap;
        }
        memcpy(b->data + b->len, data, len);
        b->len += len;
        b->data[b->len] = 0;
        return 0;
}

int secrets_read_fd(struct secrets *s, int fd) {
        struct buf b = BUF_INIT(1u << 20);
        char chunk[4096];
        int r = 0;
        for (;;) {
                ssize_t k = read(fd, chunk, sizeof chunk);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        r = -errno;
                        break;
                }
                if (k == 0)
                        break;
                if ((r = append_wiped(&b, chunk, (size_t)k)) < 0)
                        break;
        }
        secure_zero(chunk, sizeof chunk);
        for (size_t off = 0; r == 0 && off < b.len;) {
                char *rec = b.data + off;
                size_t len = strnlen(rec, b.len - off);
                if (off + len >= b.len) { /* no terminating NUL */
                        r = -EBADMSG;
                        break;
                }
                char *eq = strchr(rec, '=');
                if (!eq) {
                        r = -EBADMSG;
                        break;
                }
                *eq = 0;
                r = secrets_set(s, rec, eq + 1);
                off += len + 1;
        }
        secure_zero(b.data, b.cap);
        buf_free(&b);
        return r;
}
