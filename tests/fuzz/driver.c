/* driver.c — runs a libFuzzer target without libFuzzer (gcc, CI).
 *
 *   fuzz-<name> [N] [FILE|DIR ...]
 *
 * Feeds LLVMFuzzerTestOneInput every file of the corpus (by default
 * tests/fuzz/corpus/<name>/, compiled in as FUZZ_CORPUS_DIR), then N
 * deterministic pseudo-random mutations of them (default 2000): bit flips,
 * byte changes, truncations, deletions, duplications, splices of two inputs
 * and inserted YAML-ish tokens. Prints TAP: one line per corpus file, one for
 * the mutation batch, and the plan first. A crash or sanitizer report ends the
 * process; the input that caused it is saved as crash-<name>-<n>.bin in the
 * working directory first, so it can be replayed: fuzz-<name> 0 crash-....bin */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef FUZZ_NAME
#define FUZZ_NAME "target"
#endif
#ifndef FUZZ_CORPUS_DIR
#define FUZZ_CORPUS_DIR "corpus"
#endif

#define FUZZ_MAX_INPUT (256 * 1024)
#define MAX_FILES 1024
#define DEFAULT_MUTATIONS 2000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
        char *name;
        uint8_t *data;
        size_t len;
};

static struct input inputs[MAX_FILES];
static size_t n_inputs;

/* What is running now, for the crash handler. */
static const uint8_t *volatile cur_data;
static volatile size_t cur_len;
static volatile long cur_index = -1; /* -1: a corpus file */

static void write_str(int fd, const char *s) {
        ssize_t k = write(fd, s, strlen(s));
        (void)k;
}

static void format_long(char *out, long v) {
        char tmp[24];
        int n = 0;
        do
                tmp[n++] = (char)('0' + v % 10);
        while ((v /= 10) > 0);
        while (n > 0)
                *out++ = tmp[--n];
        *out = 0;
}

static void on_crash(int sig) {
        char num[24] = "corpus", path[96] = "crash-" FUZZ_NAME "-";
        if (cur_index >= 0)
                format_long(num, cur_index);
        strncat(path, num, sizeof(path) - strlen(path) - 5);
        strcat(path, ".bin");
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0 && cur_data) {
                ssize_t k = write(fd, (const void *)cur_data, cur_len);
                (void)k;
                close(fd);
        }
        write_str(STDOUT_FILENO, "Bail out! " FUZZ_NAME " crashed; input saved as ");
        write_str(STDOUT_FILENO, path);
        write_str(STDOUT_FILENO, "\n");
        signal(sig, SIG_DFL);
        raise(sig);
}

static int cmp_inputs(const void *a, const void *b) {
        return strcmp(((const struct input *)a)->name, ((const struct input *)b)->name);
}

static int add_file(const char *path, const char *name) {
        if (n_inputs >= MAX_FILES)
                return -E2BIG;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        uint8_t *data = malloc(FUZZ_MAX_INPUT);
        if (!data) {
                close(fd);
                return -ENOMEM;
        }
        size_t len = 0;
        for (;;) {
                ssize_t k = read(fd, data + len, FUZZ_MAX_INPUT - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                len += (size_t)k;
                if (len == FUZZ_MAX_INPUT)
                        break;
        }
        close(fd);
        inputs[n_inputs].name = strdup(name);
        inputs[n_inputs].data = data;
        inputs[n_inputs].len = len;
        if (!inputs[n_inputs].name)
                return -ENOMEM;
        n_inputs++;
        return 0;
}

static int add_path(const char *path) {
        struct stat st;
        if (stat(path, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return add_file(path, path);
        DIR *d = opendir(path);
        if (!d)
                return -errno;
        struct dirent *de;
        int r = 0;
        while (r >= 0 && (de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char full[4096];
                snprintf(full, sizeof(full), "%s/%s", path, de->d_name);
                if (stat(full, &st) == 0 && S_ISREG(st.st_mode))
                        r = add_file(full, de->d_name);
        }
        closedir(d);
        return r;
}

/* xorshift64*: deterministic across runs and machines. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545f4914f6cdd1dULL;
}
static size_t below(size_t n) {
        return n ? (size_t)(rnd() % n) : 0;
}

static const char *const tokens[] = {
        ": ", "- ", "-", "{", "}", "[", "]", ",", "? ", "|\n", ">-\n", "'", "\"", "#", "\n", "\n  ",
        "\n    - ", "\t", "---\n", "...\n", "&a ", "*a", "!!str ", "!x ", "%YAML 1.1\n", "%TAG ! tag:x:\n",
        "~", "null", "true", "false", "yes", "0", "-1", "0x1f", "1e9", "99999999999999999999", "\"\\0\"",
        "\"\\u00e9\"", "\xc3\xa9", "\xff", "\xef\xbb\xbf", "name", "server", "addr", "[::1]:80",
        "127.0.0.1:", "allowed_hosts", "model", "provider", "openai-compatible", "base_url",
        "api_key_env", "database", "url", "sandbox", "driver", "organism", "port", "evolution",
        "permissions", "ask", "kernel", "evolvable", "../", "/", "<<: ", "{a: [b, {c: d}]}",
};

static size_t mutate(uint8_t *buf, size_t len, size_t cap) {
        int ops = 1 + (int)below(4);
        for (int o = 0; o < ops; o++) {
                switch (below(8)) {
                case 0: /* flip a bit */
                        if (len)
                                buf[below(len)] ^= (uint8_t)(1u << below(8));
                        break;
                case 1: /* set a byte */
                        if (len)
                                buf[below(len)] = (uint8_t)rnd();
                        break;
                case 2: /* truncate */
                        len = below(len + 1);
                        break;
                case 3: { /* delete a range */
                        if (!len)
                                break;
                        size_t at = below(len), n = 1 + below(len - at < 16 ? len - at : 16);
                        memmove(buf + at, buf + at + n, len - at - n);
                        len -= n;
                        break;
                }
                case 4: { /* duplicate a range */
                        if (!len)
                                break;
                        size_t at = below(len), n = 1 + below(len - at < 32 ? len - at : 32);
                        if (len + n > cap)
                                break;
                        size_t to = below(len + 1);
                        uint8_t tmp[32];
                        memcpy(tmp, buf + at, n);
                        memmove(buf + to + n, buf + to, len - to);
                        memcpy(buf + to, tmp, n);
                        len += n;
                        break;
                }
                case 5: { /* splice: a prefix of this, a suffix of another input */
                        const struct input *other = &inputs[below(n_inputs)];
                        size_t keep = below(len + 1), from = below(other->len + 1);
                        size_t n = other->len - from;
                        if (keep + n > cap)
                                n = cap - keep;
                        memcpy(buf + keep, other->data + from, n);
                        len = keep + n;
                        break;
                }
                default: { /* insert a YAML-ish token */
                        const char *t = tokens[below(sizeof(tokens) / sizeof(tokens[0]))];
                        size_t n = strlen(t), at = below(len + 1);
                        if (len + n > cap)
                                break;
                        memmove(buf + at + n, buf + at, len - at);
                        memcpy(buf + at, t, n);
                        len += n;
                        break;
                }
                }
        }
        return len;
}

/* Runs one input from a private heap copy of exactly len bytes, so reads past
 * the end are caught by ASan or valgrind. */
static void run_one(const uint8_t *data, size_t len, long index) {
        uint8_t *copy = malloc(len ? len : 1);
        if (!copy) {
                printf("Bail out! out of memory\n");
                exit(1);
        }
        memcpy(copy, data, len);
        cur_data = copy;
        cur_len = len;
        cur_index = index;
        LLVMFuzzerTestOneInput(copy, len);
        cur_data = NULL;
        free(copy);
}

int main(int argc, char **argv) {
        long mutations = DEFAULT_MUTATIONS;
        int first = 1;
        if (argc > 1) {
                char *end;
                errno = 0;
                long v = strtol(argv[1], &end, 10);
                if (*argv[1] && !*end && !errno && v >= 0) {
                        mutations = v;
                        first = 2;
                }
        }
        int r = 0;
        if (first < argc) {
                for (int i = first; i < argc && r >= 0; i++)
                        r = add_path(argv[i]);
        } else {
                r = add_path(FUZZ_CORPUS_DIR);
        }
        if (r < 0) {
                printf("Bail out! cannot read the corpus: %s\n", strerror(-r));
                return 1;
        }
        if (n_inputs == 0) {
                printf("Bail out! the corpus is empty\n");
                return 1;
        }
        qsort(inputs, n_inputs, sizeof(inputs[0]), cmp_inputs);

        signal(SIGSEGV, on_crash);
        signal(SIGBUS, on_crash);
        signal(SIGFPE, on_crash);
        signal(SIGILL, on_crash);
        signal(SIGABRT, on_crash);

        printf("1..%zu\n", n_inputs + 1);
        fflush(stdout);
        for (size_t i = 0; i < n_inputs; i++) {
                run_one(inputs[i].data, inputs[i].len, -1);
                printf("ok %zu - " FUZZ_NAME " corpus %s (%zu bytes)\n", i + 1, inputs[i].name, inputs[i].len);
                fflush(stdout);
        }

        size_t cap = FUZZ_MAX_INPUT;
        uint8_t *buf = malloc(cap);
        if (!buf) {
                printf("Bail out! out of memory\n");
                return 1;
        }
        for (long m = 0; m < mutations; m++) {
                const struct input *in = &inputs[(size_t)m % n_inputs];
                memcpy(buf, in->data, in->len);
                size_t len = mutate(buf, in->len, cap);
                run_one(buf, len, m);
        }
        printf("ok %zu - " FUZZ_NAME " %ld mutations\n", n_inputs + 1, mutations);
        free(buf);
        for (size_t i = 0; i < n_inputs; i++) {
                free(inputs[i].name);
                free(inputs[i].data);
        }
        return 0;
}
