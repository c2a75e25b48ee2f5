/* Unit tests for kernel/base: bounded buffers, head+tail capture, crypto
 * helpers, file helpers, process spawning and the small string helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "base/buf.h"
#include "base/text.h"
#include "base/crypto.h"
#include "base/fileio.h"
#include "base/fswatch.h"
#include "base/proc.h"
#include "base/log.h"

static char tmpdir[] = "/tmp/seed-test-base-XXXXXX";

/* tmpdir/name, for the test's own files. Caller frees. */
static char *tpath(const char *name) {
        char *p = path_join(tmpdir, name);
        assert_non_null(p);
        return p;
}

static void put_file(const char *path, const char *content) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
        close(fd);
}

static mode_t mode_of(const char *path) {
        struct stat st;
        assert_int_equal(lstat(path, &st), 0);
        return st.st_mode & 07777;
}

/* ---- buf ---------------------------------------------------------------- */

static void test_buf_cap(void **state) {
        _cleanup_buf_ struct buf b = BUF_INIT(8);
        assert_int_equal(buf_append(&b, "abcd", 4), 0);
        assert_int_equal(buf_append(&b, "12345", 5), -E2BIG);
        assert_int_equal(b.len, 4);
        assert_string_equal(b.data, "abcd");
        assert_int_equal(buf_printf(&b, "%s", "too long"), -E2BIG);
        assert_int_equal(buf_puts(&b, "12345"), -E2BIG);
        assert_string_equal(b.data, "abcd");
        assert_int_equal(buf_append(&b, "1234", 4), 0); /* exactly the cap */
        assert_int_equal(b.len, 8);
        assert_int_equal(buf_append(&b, "", 0), 0);
        assert_int_equal(buf_append(&b, "x", 1), -E2BIG);
        assert_int_equal(b.len, 8);
        assert_string_equal(b.data, "abcd1234");
        /* A length that would overflow len + n is refused, not wrapped. */
        assert_int_equal(buf_append(&b, "x", SIZE_MAX), -E2BIG);
        assert_string_equal(b.data, "abcd1234");

        _cleanup_buf_ struct buf z = BUF_INIT(0);
        assert_int_equal(buf_append(&z, "x", 1), -E2BIG);
        assert_null(z.data);
        assert_int_equal(z.len, 0);
}

static void test_buf_grow_and_printf(void **state) {
        _cleanup_buf_ struct buf b = BUF_INIT(1 << 20);
        for (int i = 0; i < 1000; i++)
                assert_int_equal(buf_printf(&b, "%d,", i % 10), 0);
        assert_int_equal(b.len, 2000);
        assert_int_equal(strlen(b.data), 2000);
        assert_memory_equal(b.data, "0,1,2,", 6);
        assert_string_equal(b.data + 1994, "7,8,9,");
        buf_reset(&b);
        assert_int_equal(b.len, 0);
        assert_string_equal(b.data, "");
        assert_int_equal(buf_printf(&b, "%s=%05d|%x", "k", 42, 255), 0);
        assert_string_equal(b.data, "k=00042|ff");
        assert_int_equal(b.len, strlen("k=00042|ff"));
        /* Formatted where there is room, or after growing: the bytes before
         * stay, and the result is whole either way. */
        _cleanup_buf_ struct buf g = BUF_INIT(1 << 20);
        char big[301];
        memset(big, 'b', 300);
        big[300] = 0;
        assert_int_equal(buf_printf(&g, "%.200s", big), 0); /* fits the first 256 bytes */
        size_t cap = g.cap;
        assert_int_equal(buf_printf(&g, "[%s|%d]", big, 7), 0); /* does not: grown */
        assert_true(g.cap > cap);
        assert_int_equal(g.len, 200 + 300 + 4);
        assert_int_equal(strlen(g.data), g.len);
        assert_memory_equal(g.data + 199, "b[b", 3);
        assert_string_equal(g.data + g.len - 4, "b|7]");
        /* Binary data keeps its NULs and is still terminated. */
        buf_reset(&b);
        assert_int_equal(buf_append(&b, "a\0b", 3), 0);
        assert_int_equal(b.len, 3);
        assert_memory_equal(b.data, "a\0b\0", 4);
}

static void test_buf_steal(void **state) {
        struct buf b = BUF_INIT(64);
        assert_int_equal(buf_puts(&b, "hello"), 0);
        char *s = buf_steal(&b);
        assert_string_equal(s, "hello");
        assert_null(b.data);
        assert_int_equal(b.len, 0);
        /* The buffer is reusable and does not alias the stolen string. */
        assert_int_equal(buf_puts(&b, "again"), 0);
        assert_string_equal(b.data, "again");
        assert_string_equal(s, "hello");
        free(s);
        buf_free(&b);
        /* Stealing an empty buffer gives an empty string, not NULL. */
        struct buf e = BUF_INIT(64);
        char *t = buf_steal(&e);
        assert_non_null(t);
        assert_string_equal(t, "");
        free(t);
        buf_free(&e); /* idempotent */
}

/* ---- headtail ----------------------------------------------------------- */

static char *render(size_t head, size_t tail, const char *const *pieces) {
        struct headtail h;
        assert_int_equal(headtail_init(&h, head, tail), 0);
        for (; *pieces; pieces++)
                headtail_feed(&h, *pieces, strlen(*pieces));
        char *s = headtail_render(&h);
        assert_non_null(s);
        headtail_free(&h);
        return s;
}

static void test_headtail_head_only(void **state) {
        _cleanup_free_ char *a = render(16, 0, (const char *const[]){"hel", "lo", NULL});
        assert_string_equal(a, "hello");
        _cleanup_free_ char *b = render(16, 16, (const char *const[]){"hello", NULL});
        assert_string_equal(b, "hello");
        /* Exactly head + tail bytes: nothing omitted, no marker. */
        _cleanup_free_ char *c = render(3, 3, (const char *const[]){"abcdef", NULL});
        assert_string_equal(c, "abcdef");
        _cleanup_free_ char *d = render(16, 0, (const char *const[]){NULL});
        assert_string_equal(d, "");
}

static void test_headtail_head_and_tail(void **state) {
        /* Fed in pieces that straddle the head and wrap the tail ring. */
        _cleanup_free_ char *a =
                render(4, 4, (const char *const[]){"01", "2345", "6", "789AB", "CDEF", NULL});
        assert_string_equal(a, "0123\n[... 8 bytes omitted ...]\nCDEF");
        _cleanup_free_ char *b = render(4, 4, (const char *const[]){"0123456789ABCDEFG", NULL});
        assert_string_equal(b, "0123\n[... 9 bytes omitted ...]\nDEFG");
        /* One byte over. */
        _cleanup_free_ char *c = render(3, 3, (const char *const[]){"abcdefg", NULL});
        assert_string_equal(c, "abc\n[... 1 bytes omitted ...]\nefg");
}

static void test_headtail_tiny_and_zero_tail(void **state) {
        _cleanup_free_ char *a = render(2, 1, (const char *const[]){"abc", "def", NULL});
        assert_string_equal(a, "ab\n[... 3 bytes omitted ...]\nf");
        _cleanup_free_ char *b = render(3, 0, (const char *const[]){"abcdefg", NULL});
        assert_string_equal(b, "abc\n[... 4 bytes omitted ...]\n");
        _cleanup_free_ char *c = render(0, 3, (const char *const[]){"abcdef", NULL});
        assert_string_equal(c, "\n[... 3 bytes omitted ...]\ndef");
        _cleanup_free_ char *d = render(0, 0, (const char *const[]){"abcdef", "gh", NULL});
        assert_string_equal(d, "\n[... 8 bytes omitted ...]\n");
}

/* A NUL in command output cannot hide what follows it. */
static void test_headtail_nul_bytes(void **state) {
        struct headtail h;
        assert_int_equal(headtail_init(&h, 4, 4), 0);
        headtail_feed(&h, "a\0b", 3);
        headtail_feed(&h, "cdefg\0hidden\0", 13);
        _cleanup_free_ char *s = headtail_render(&h);
        headtail_free(&h);
        assert_string_equal(s, "a\xEF\xBF\xBD" "bc\n[... 8 bytes omitted ...]\nden\xEF\xBF\xBD");
}

/* ---- text --------------------------------------------------------------- */

static size_t seq(const char *s, size_t n) { return utf8_seq((const unsigned char *)s, n); }

static void test_utf8_and_hex(void **state) {
        assert_int_equal(seq("a", 1), 1);
        assert_int_equal(seq("", 1), 1);            /* NUL is a sequence */
        assert_int_equal(seq("\xc3\xa9", 2), 2);   /* é */
        assert_int_equal(seq("\xc3\xa9", 1), 0);   /* cut short */
        assert_int_equal(seq("\xe2\x82\xac", 3), 3); /* € */
        assert_int_equal(seq("\xf0\x9f\x8c\xb1", 4), 4); /* 🌱 */
        assert_int_equal(seq("\xc0\xaf", 2), 0);   /* overlong / */
        assert_int_equal(seq("\xe0\x80\xaf", 3), 0);
        assert_int_equal(seq("\xed\xa0\x80", 3), 0); /* a surrogate */
        assert_int_equal(seq("\xf4\x90\x80\x80", 4), 0); /* above U+10FFFF */
        assert_int_equal(seq("\x80", 1), 0);       /* a lone continuation */
        assert_int_equal(seq("\xc3(", 2), 0);
        assert_int_equal(hex_digit('0'), 0);
        assert_int_equal(hex_digit('f'), 15);
        assert_int_equal(hex_digit('F'), 15);
        assert_int_equal(hex_digit('g'), -1);
        assert_int_equal(hex_digit('\0'), -1);
}

/* ---- crypto ------------------------------------------------------------- */

static void test_crypto_hex_and_hashes(void **state) {
        char hex[9];
        crypto_hex("\x00\x01\xab\xff", 4, hex);
        assert_string_equal(hex, "0001abff");
        crypto_hex("", 0, hex);
        assert_string_equal(hex, "");

        char out[SHA256_HEX_LEN + 1];
        crypto_sha256_hex("abc", 3, out);
        assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        crypto_sha256_hex("", 0, out);
        assert_string_equal(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

        /* RFC 4231, test case 2. */
        const char *msg = "what do ya want for nothing?";
        crypto_hmac_sha256_hex("Jefe", 4, msg, strlen(msg), out);
        assert_string_equal(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        /* RFC 4231, test case 6: a key longer than the block, hashed first. */
        unsigned char key[131];
        memset(key, 0xaa, sizeof key);
        msg = "Test Using Larger Than Block-Size Key - Hash Key First";
        crypto_hmac_sha256_hex(key, sizeof key, msg, strlen(msg), out);
        assert_string_equal(out, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
        /* The same again (the MAC is fetched once, each call has its own state). */
        crypto_hmac_sha256_hex("Jefe", 4, "what do ya want for nothing?", 28, out);
        assert_string_equal(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

/* RFC 4231's test cases 1 to 4 and 6: more keys than the kept contexts,
 * one longer than a slot, asked in turns and from four threads at once. */
struct hmac_case {
        unsigned char key[131];
        size_t keylen;
        unsigned char msg[64];
        size_t len;
        const char *want;
};

static struct hmac_case hmac_cases[5];

static void hmac_cases_init(void) {
        struct hmac_case *c = hmac_cases;
        memset(c[0].key, 0x0b, c[0].keylen = 20);
        memcpy(c[0].msg, "Hi There", c[0].len = 8);
        c[0].want = "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7";
        memcpy(c[1].key, "Jefe", c[1].keylen = 4);
        memcpy(c[1].msg, "what do ya want for nothing?", c[1].len = 28);
        c[1].want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        memset(c[2].key, 0xaa, c[2].keylen = 20);
        memset(c[2].msg, 0xdd, c[2].len = 50);
        c[2].want = "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe";
        for (c[3].keylen = 0; c[3].keylen < 25; c[3].keylen++)
                c[3].key[c[3].keylen] = (unsigned char)(c[3].keylen + 1);
        memset(c[3].msg, 0xcd, c[3].len = 50);
        c[3].want = "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b";
        memset(c[4].key, 0xaa, c[4].keylen = 131);
        memcpy(c[4].msg, "Test Using Larger Than Block-Size Key - Hash Key First", c[4].len = 54);
        c[4].want = "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54";
}

static void *hmac_rounds(void *arg) {
        size_t start = (size_t)(uintptr_t)arg;
        char out[SHA256_HEX_LEN + 1];
        for (size_t i = 0; i < 500; i++) {
                const struct hmac_case *c = &hmac_cases[(start + i) % ARRAY_SIZE(hmac_cases)];
                crypto_hmac_sha256_hex(c->key, c->keylen, c->msg, c->len, out);
                if (strcmp(out, c->want) != 0)
                        return (void *)c->want;
        }
        return NULL;
}

static void test_crypto_hmac_keys(void **state) {
        hmac_cases_init();
        char out[SHA256_HEX_LEN + 1], other[SHA256_HEX_LEN + 1];
        for (int round = 0; round < 3; round++)
                for (size_t i = 0; i < ARRAY_SIZE(hmac_cases); i++) {
                        const struct hmac_case *c = &hmac_cases[i];
                        crypto_hmac_sha256_hex(c->key, c->keylen, c->msg, c->len, out);
                        assert_string_equal(out, c->want);
                }
        /* A key one byte off, or one byte shorter, is another key. */
        crypto_hmac_sha256_hex("Jeff", 4, hmac_cases[1].msg, hmac_cases[1].len, out);
        crypto_hmac_sha256_hex("Jef", 3, hmac_cases[1].msg, hmac_cases[1].len, other);
        assert_string_not_equal(out, hmac_cases[1].want);
        assert_string_not_equal(other, hmac_cases[1].want);
        assert_string_not_equal(out, other);
        /* Forgotten keys are keyed anew. */
        crypto_hmac_forget();
        crypto_hmac_sha256_hex(hmac_cases[0].key, hmac_cases[0].keylen, hmac_cases[0].msg, hmac_cases[0].len, out);
        assert_string_equal(out, hmac_cases[0].want);
        pthread_t th[4];
        for (size_t i = 0; i < ARRAY_SIZE(th); i++)
                assert_int_equal(pthread_create(&th[i], NULL, hmac_rounds, (void *)(uintptr_t)i), 0);
        for (size_t i = 0; i < ARRAY_SIZE(th); i++) {
                void *bad = NULL;
                pthread_join(th[i], &bad);
                assert_null(bad);
        }
}

static bool all_lower_hex(const char *s) {
        for (; *s; s++)
                if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
                        return false;
        return true;
}

static void test_crypto_random(void **state) {
        _cleanup_free_ char *a = NULL, *b = NULL, *big = NULL;
        assert_int_equal(crypto_random_hex(16, &a), 0);
        assert_int_equal(crypto_random_hex(16, &b), 0);
        assert_int_equal(strlen(a), 32);
        assert_int_equal(strlen(b), 32);
        assert_true(all_lower_hex(a));
        assert_true(all_lower_hex(b));
        assert_string_not_equal(a, b);
        assert_int_equal(crypto_random_hex(128, &big), 0);
        assert_int_equal(strlen(big), 256);
        assert_true(all_lower_hex(big));
        char *untouched = (char *)"sentinel";
        assert_int_equal(crypto_random_hex(0, &untouched), -EINVAL);
        assert_int_equal(crypto_random_hex(129, &untouched), -EINVAL);
        assert_string_equal(untouched, "sentinel");

        uint8_t r1[32] = {0}, r2[32] = {0};
        assert_int_equal(crypto_random(r1, sizeof r1), 0);
        assert_int_equal(crypto_random(r2, sizeof r2), 0);
        assert_memory_not_equal(r1, r2, sizeof r1);
}

static void test_crypto_streq_ct(void **state) {
        assert_true(crypto_streq_ct("secret-token", "secret-token"));
        assert_true(crypto_streq_ct("", ""));
        assert_false(crypto_streq_ct("secret-token", "secret-tokeN"));
        assert_false(crypto_streq_ct("abc", "abcd"));
        assert_false(crypto_streq_ct("abcd", "abc"));
        assert_false(crypto_streq_ct("", "a"));
        assert_false(crypto_streq_ct("a", ""));
        assert_true(crypto_memeq_ct("abcd", "abcd", 4));
        assert_false(crypto_memeq_ct("abcd", "abce", 4));
        assert_true(crypto_memeq_ct("abcd", "abce", 3));
        assert_true(crypto_memeq_ct("", "x", 0));
}

/* ---- fileio ------------------------------------------------------------- */

static void test_read_file(void **state) {
        _cleanup_free_ char *p = tpath("read.txt");
        char content[101];
        memset(content, 'r', 100);
        content[100] = 0;
        content[50] = 'X';
        put_file(p, content);

        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(p, 100, &data, &len), 0); /* exactly the cap */
        assert_int_equal(len, 100);
        assert_string_equal(data, content);
        free(TAKE_PTR(data));
        assert_int_equal(read_file(p, 1 << 20, &data, NULL), 0);
        assert_string_equal(data, content);
        free(TAKE_PTR(data));
        assert_int_equal(read_file(p, 99, &data, &len), -EFBIG);
        assert_null(data);

        _cleanup_free_ char *e = tpath("empty.txt");
        put_file(e, "");
        assert_int_equal(read_file(e, 0, &data, &len), 0);
        assert_int_equal(len, 0);
        assert_string_equal(data, "");
        free(TAKE_PTR(data));

        /* /proc files report size 0: read by growing, still capped. */
        assert_int_equal(read_file("/proc/self/status", 1 << 20, &data, &len), 0);
        assert_true(len > 0 && len == strlen(data));
        assert_non_null(strstr(data, "Pid:"));
        free(TAKE_PTR(data));
        assert_int_equal(read_file("/proc/self/status", 10, &data, &len), -EFBIG);
        assert_null(data);

        assert_int_equal(read_file("/nonexistent/seed-test", 10, &data, NULL), -ENOENT);
}

static void test_read_file_refuses_non_regular(void **state) {
        _cleanup_free_ char *data = NULL;
        assert_int_equal(read_file(tmpdir, 1 << 20, &data, NULL), -EINVAL);
        assert_int_equal(read_file("/dev/null", 1 << 20, &data, NULL), -EINVAL);
        assert_int_equal(read_file("/dev/zero", 1 << 20, &data, NULL), -EINVAL);
        /* A FIFO with no writer is refused at once instead of blocking in
         * open(); alarm() turns a hang into a failure. */
        _cleanup_free_ char *fifo = tpath("fifo");
        assert_int_equal(mkfifo(fifo, 0600), 0);
        alarm(10);
        assert_int_equal(read_file(fifo, 1 << 20, &data, NULL), -EINVAL);
        alarm(0);
        assert_null(data);
}

static void test_write_file_atomic(void **state) {
        _cleanup_free_ char *p = tpath("atomic.txt");
        mode_t old = umask(0);
        assert_int_equal(write_file_atomic(p, "one", 3, 0600), 0);
        assert_int_equal(mode_of(p), 0600);
        umask(077);
        /* Replacing keeps no trace of the old mode or content. */
        assert_int_equal(write_file_atomic(p, "second", 6, 0644), 0);
        assert_int_equal(mode_of(p), 0644);
        umask(0);
        assert_int_equal(write_file_atomic(p, "", 0, 0640), 0);
        assert_int_equal(mode_of(p), 0640);
        assert_int_equal(write_file_atomic(p, "third\n", 6, 0600), 0);
        umask(old);
        _cleanup_free_ char *data = NULL;
        assert_int_equal(read_file(p, 64, &data, NULL), 0);
        assert_string_equal(data, "third\n");

        /* No temp files are left behind. */
        DIR *d = opendir(tmpdir);
        assert_non_null(d);
        for (struct dirent *de; (de = readdir(d));)
                assert_null(strstr(de->d_name, ".tmp"));
        closedir(d);

        /* A symlink at the path is replaced, never written through. */
        _cleanup_free_ char *target = tpath("atomic-target"), *link = tpath("atomic-link");
        put_file(target, "keep");
        assert_int_equal(symlink(target, link), 0);
        assert_int_equal(write_file_atomic(link, "new", 3, 0600), 0);
        free(TAKE_PTR(data));
        assert_int_equal(read_file(target, 64, &data, NULL), 0);
        assert_string_equal(data, "keep");
        struct stat st;
        assert_int_equal(lstat(link, &st), 0);
        assert_true(S_ISREG(st.st_mode));

        /* A missing directory fails cleanly. */
        _cleanup_free_ char *bad = tpath("no-such-dir/file");
        assert_int_equal(write_file_atomic(bad, "x", 1, 0600), -ENOENT);
}

struct writer {
        const char *path;
        char fill;
        int failures;
};

static void *writer_main(void *u) {
        struct writer *w = u;
        static char data[2][8192];
        char *d = data[w->fill == 'b'];
        memset(d, w->fill, sizeof data[0]);
        for (int i = 0; i < 200; i++)
                if (write_file_atomic(w->path, d, sizeof data[0], 0600) < 0)
                        w->failures++;
        return NULL;
}

static void test_write_file_atomic_concurrent(void **state) {
        /* Two threads of one process replacing the same file: every write
         * succeeds and the file is always one whole version. */
        _cleanup_free_ char *p = tpath("contended");
        struct writer a = {p, 'a', 0}, b = {p, 'b', 0};
        pthread_t ta, tb;
        assert_int_equal(pthread_create(&ta, NULL, writer_main, &a), 0);
        assert_int_equal(pthread_create(&tb, NULL, writer_main, &b), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        assert_int_equal(a.failures, 0);
        assert_int_equal(b.failures, 0);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(p, 1 << 20, &data, &len), 0);
        assert_int_equal(len, 8192);
        for (size_t i = 1; i < len; i++)
                assert_int_equal(data[i], data[0]);
        assert_int_equal(unlink(p), 0);
}

static void test_mkdir_helpers(void **state) {
        _cleanup_free_ char *p = tpath("modedir"), *q = tpath("a/b/c"), *f = tpath("plainfile"),
                            *l = tpath("dirlink");
        mode_t old = umask(077);
        assert_int_equal(mkdir_mode(p, 0755), 0);
        assert_int_equal(mode_of(p), 0755);
        assert_int_equal(chmod(p, 0777), 0);
        assert_int_equal(mkdir_mode(p, 0700), 0); /* existing: forced */
        assert_int_equal(mode_of(p), 0700);
        umask(old);

        put_file(f, "x");
        assert_int_equal(mkdir_mode(f, 0700), -ENOTDIR);
        /* A symlink to a directory is refused and its target left alone. */
        assert_int_equal(symlink(p, l), 0);
        assert_int_equal(mkdir_mode(l, 0777), -ENOTDIR);
        assert_int_equal(mode_of(p), 0700);

        assert_int_equal(mkdir_p(q, 0755), 0);
        assert_true(path_exists(q));
        assert_int_equal(mkdir_p(q, 0755), 0); /* already there */
        _cleanup_free_ char *under_file = tpath("plainfile/sub");
        assert_true(mkdir_p(under_file, 0755) < 0);
}

static void test_rm_rf_does_not_follow_symlinks(void **state) {
        _cleanup_free_ char *outside = tpath("outside"), *secret = tpath("outside/precious"),
                            *tree = tpath("tree"), *sub = tpath("tree/sub/deeper"),
                            *f1 = tpath("tree/file"), *f2 = tpath("tree/sub/deeper/file"),
                            *l1 = tpath("tree/link-to-outside"),
                            *l2 = tpath("tree/sub/link-to-file"), *top = tpath("toplink");
        assert_int_equal(mkdir(outside, 0700), 0);
        put_file(secret, "do not delete");
        assert_int_equal(mkdir_p(sub, 0755), 0);
        put_file(f1, "1");
        put_file(f2, "2");
        assert_int_equal(symlink(outside, l1), 0);
        assert_int_equal(symlink(secret, l2), 0);

        assert_int_equal(rm_rf(tree), 0);
        assert_false(path_exists(tree));
        assert_true(path_exists(outside));
        _cleanup_free_ char *data = NULL;
        assert_int_equal(read_file(secret, 64, &data, NULL), 0);
        assert_string_equal(data, "do not delete");

        /* The path itself a symlink to a directory: only the link goes. */
        assert_int_equal(symlink(outside, top), 0);
        assert_int_equal(rm_rf(top), 0);
        assert_false(path_exists(top));
        assert_true(path_exists(secret));

        assert_int_equal(rm_rf(tree), 0); /* missing is fine */
        assert_int_equal(rm_rf(outside), 0);
        assert_false(path_exists(outside));
}

static void test_path_helpers(void **state) {
        const char *cases[][3] = {
                {"a", "b", "a/b"},       {"a/", "b", "a/b"},   {"a", "/b", "a/b"},
                {"a/", "//b", "a/b"},    {"/", "x", "/x"},     {"/srv/seed", ".seed/run", "/srv/seed/.seed/run"},
                {"a", "", "a/"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_free_ char *j = path_join(cases[i][0], cases[i][1]);
                assert_non_null(j);
                assert_string_equal(j, cases[i][2]);
        }
        assert_true(path_exists(tmpdir));
        assert_false(path_exists("/nonexistent/seed-test"));

        _cleanup_free_ char *dotted = NULL, *abs = NULL;
        assert_int_equal(xasprintf(&dotted, "%s/./.", tmpdir), 0);
        assert_int_equal(path_abs(dotted, &abs), 0);
        assert_string_equal(abs, tmpdir);
        char *untouched = NULL;
        assert_int_equal(path_abs("/nonexistent/seed-test", &untouched), -ENOENT);
        assert_null(untouched);
}

/* ---- proc --------------------------------------------------------------- */

static struct proc_result run(char *const *argv, char *const *envp) {
        struct proc_opts o = {.argv = argv, .envp = envp, .stdin_fd = -1, .out_fd = -1,
                              .timeout_ms = 20000};
        struct proc_result res = {0};
        assert_int_equal(proc_run(&o, &res), 0);
        assert_false(res.timed_out);
        assert_non_null(res.output);
        return res;
}

static void test_proc_run_captures(void **state) {
        char *argv[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
        struct proc_result res = run(argv, NULL);
        assert_int_equal(res.exit_code, 3);
        assert_string_equal(res.output, "out\nerr\n");
        proc_result_done(&res);
        assert_null(res.output);

        char *ok[] = {"/bin/true", NULL};
        res = run(ok, NULL);
        assert_int_equal(res.exit_code, 0);
        assert_string_equal(res.output, "");
        proc_result_done(&res);

        /* A missing program: it ran (fork worked) and exited 127. */
        char *missing[] = {"/nonexistent/seed-test", NULL};
        res = run(missing, NULL);
        assert_int_equal(res.exit_code, 127);
        proc_result_done(&res);

        struct proc_opts bad = {.argv = NULL, .stdin_fd = -1, .out_fd = -1};
        pid_t pid = 0;
        assert_int_equal(proc_spawn(&bad, &pid), -EINVAL);
        assert_int_equal(pid, 0);
}

static void test_proc_caps_output(void **state) {
        char *argv[] = {"/bin/sh", "-c", "printf 0123456789ABCDEF", NULL};
        struct proc_opts o = {.argv = argv, .stdin_fd = -1, .out_fd = -1, .out_head = 4,
                              .out_tail = 4, .timeout_ms = 20000};
        struct proc_result res = {0};
        assert_int_equal(proc_run(&o, &res), 0);
        assert_int_equal(res.exit_code, 0);
        assert_string_equal(res.output, "0123\n[... 8 bytes omitted ...]\nCDEF");
        proc_result_done(&res);
}

static void test_proc_stdin_cwd_out_fd(void **state) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(write(p[1], "from stdin", 10), 10);
        close(p[1]);
        char *cat[] = {"/bin/cat", NULL};
        struct proc_opts o = {.argv = cat, .stdin_fd = p[0], .out_fd = -1, .timeout_ms = 20000};
        struct proc_result res = {0};
        assert_int_equal(proc_run(&o, &res), 0);
        close(p[0]);
        assert_string_equal(res.output, "from stdin");
        proc_result_done(&res);
        /* Default stdin is /dev/null: cat ends at once. */
        res = run(cat, NULL);
        assert_int_equal(res.exit_code, 0);
        assert_string_equal(res.output, "");
        proc_result_done(&res);

        char *pwd[] = {"/bin/sh", "-c", "pwd", NULL};
        o = (struct proc_opts){.argv = pwd, .cwd = tmpdir, .stdin_fd = -1, .out_fd = -1,
                               .timeout_ms = 20000};
        assert_int_equal(proc_run(&o, &res), 0);
        _cleanup_free_ char *want = NULL;
        assert_int_equal(xasprintf(&want, "%s\n", tmpdir), 0);
        assert_string_equal(res.output, want);
        proc_result_done(&res);
        o.cwd = "/nonexistent/seed-test";
        assert_int_equal(proc_run(&o, &res), 0);
        assert_int_equal(res.exit_code, 127);
        proc_result_done(&res);

        /* out_fd: stdout and stderr go to the file, nothing is captured. */
        _cleanup_free_ char *path = tpath("proc-out.txt"), *data = NULL;
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        char *both[] = {"/bin/sh", "-c", "echo to-file; echo err >&2; exit 5", NULL};
        o = (struct proc_opts){.argv = both, .stdin_fd = -1, .out_fd = fd, .timeout_ms = 20000};
        assert_int_equal(proc_run(&o, &res), 0);
        close(fd);
        assert_int_equal(res.exit_code, 5);
        assert_null(res.output);
        assert_int_equal(read_file(path, 64, &data, NULL), 0);
        assert_string_equal(data, "to-file\nerr\n");
}

static void test_proc_exact_environment(void **state) {
        setenv("SEED_TEST_MUST_NOT_LEAK", "leaked", 1);
        char *env[] = {"/usr/bin/env", NULL};
        char *envp[] = {"A=1", "B=two words", NULL};
        struct proc_result res = run(env, envp);
        assert_int_equal(res.exit_code, 0);
        assert_string_equal(res.output, "A=1\nB=two words\n");
        proc_result_done(&res);
        /* NULL is the empty environment, not ours. */
        res = run(env, NULL);
        assert_int_equal(res.exit_code, 0);
        assert_string_equal(res.output, "");
        proc_result_done(&res);
        unsetenv("SEED_TEST_MUST_NOT_LEAK");
}

/* The fd numbers listed in ls's output, as a bitmap of the first 128. */
static void parse_fd_list(const char *out, bool fds[128], int *ret_count) {
        int count = 0;
        memset(fds, 0, 128 * sizeof(bool));
        for (const char *p = out; *p;) {
                char *end;
                long v = strtol(p, &end, 10);
                assert_true(end != p && (*end == '\n' || *end == 0));
                assert_true(v >= 0 && v < 128);
                fds[v] = true;
                count++;
                p = *end ? end + 1 : end;
        }
        *ret_count = count;
}

static void test_proc_fds(void **state) {
        /* An fd opened without O_CLOEXEC, as a careless library would. */
        int raw = open("/dev/null", O_RDONLY);
        assert_true(raw >= 0);
        assert_int_equal(dup2(raw, 100), 100);
        close(raw); /* frees the low number for ls */
        assert_int_equal(fcntl(100, F_GETFD) & FD_CLOEXEC, 0);
        /* An fd passed on purpose, CLOEXEC like every fd of ours. */
        int keep_src = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(keep_src >= 0);
        assert_int_equal(dup3(keep_src, 101, O_CLOEXEC), 101);
        int keep[] = {101};

        char *ls[] = {"/bin/ls", "/proc/self/fd", NULL};
        struct proc_opts o = {.argv = ls, .stdin_fd = -1, .out_fd = -1, .keep_fds = keep,
                              .n_keep_fds = 1, .timeout_ms = 20000};
        struct proc_result res = {0};
        assert_int_equal(proc_run(&o, &res), 0);
        assert_int_equal(res.exit_code, 0);
        bool fds[128];
        int count = 0;
        parse_fd_list(res.output, fds, &count);
        /* 0, 1, 2, the kept fd and the one ls lists with (the lowest free). */
        assert_true(fds[0] && fds[1] && fds[2]);
        assert_true(fds[101]);
        assert_false(fds[100]);
        assert_true(fds[3]);
        assert_int_equal(count, 5);
        proc_result_done(&res);
        /* The parent's fds are as they were. */
        assert_true(fcntl(101, F_GETFD) & FD_CLOEXEC);
        close(100);
        close(keep_src);
        close(101);
}

/* In a forked helper: runs ls /proc/self/fd through proc_run with fd 100
 * leaked and fd 101 kept; 0 if exactly 0, 1, 2, 3 and 101 are listed. */
static int fds_seen_ok(void) {
        int raw = open("/dev/null", O_RDONLY);
        if (raw < 0 || dup2(raw, 100) != 100 || dup3(raw, 101, O_CLOEXEC) != 101)
                return 10;
        close(raw);
        char *ls[] = {"/bin/ls", "/proc/self/fd", NULL};
        int keep[] = {101};
        struct proc_opts o = {.argv = ls, .stdin_fd = -1, .out_fd = -1, .keep_fds = keep,
                              .n_keep_fds = 1, .timeout_ms = 20000};
        struct proc_result res = {0};
        if (proc_run(&o, &res) < 0 || res.exit_code != 0 || !res.output)
                return 11;
        bool ok = streq(res.output, "0\n1\n101\n2\n3\n");
        proc_result_done(&res);
        return ok ? 0 : 12;
}

static void test_proc_fds_without_close_range(void **state) {
#ifdef __NR_close_range
        /* Kernels before 5.11 refuse CLOSE_RANGE_CLOEXEC: a seccomp filter
         * makes close_range() fail with ENOSYS, as there, so the fallback
         * has to mark the fds itself. */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct sock_filter f[] = {
                        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_close_range, 0, 1),
                        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
                        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                };
                struct sock_fprog prog = {.len = ARRAY_SIZE(f), .filter = f};
                struct rlimit rl = {1024, 1024}; /* keeps the fallback's loop short */
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
                    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
                        _exit(20);
                if (syscall(__NR_close_range, 3, ~0U, 0) == 0 || errno != ENOSYS)
                        _exit(21);
                _exit(fds_seen_ok());
        }
        assert_int_equal(proc_wait(pid, 20000), 0);
#else
        skip();
#endif
}

static void test_proc_new_session(void **state) {
        /* The child leads its own session and process group. */
        char *argv[] = {"/bin/sh", "-c",
                        "read pid comm st ppid pgrp sid rest < /proc/$$/stat; "
                        "echo \"$(( pgrp == $$ )) $(( sid == $$ ))\"",
                        NULL};
        for (int i = 0; i < 20; i++) {
                struct proc_result res = run(argv, NULL);
                assert_string_equal(res.output, "1 1\n");
                proc_result_done(&res);
        }
}

/* Processes (not zombies) in process group pgid. */
static int group_members(pid_t pgid) {
        DIR *d = opendir("/proc");
        assert_non_null(d);
        int n = 0;
        for (struct dirent *de; (de = readdir(d));) {
                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                char path[300], buf[512];
                snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t k = read(fd, buf, sizeof buf - 1);
                close(fd);
                if (k <= 0)
                        continue;
                buf[k] = 0;
                const char *rp = strrchr(buf, ')');
                char st;
                int ppid, pgrp;
                if (!rp || sscanf(rp + 1, " %c %d %d", &st, &ppid, &pgrp) != 3)
                        continue;
                if (pgrp == pgid && st != 'Z' && st != 'X')
                        n++;
        }
        closedir(d);
        return n;
}

static bool wait_group_gone(pid_t pgid, int timeout_ms) {
        int64_t deadline = now_ms() + timeout_ms;
        while (group_members(pgid) > 0) {
                if (now_ms() >= deadline)
                        return false;
                sched_yield();
        }
        return true;
}

static void test_proc_timeout_kills_group(void **state) {
        /* The grandchild holds the output pipe open too. */
        char *argv[] = {"/bin/sh", "-c", "echo $$; sleep 100 & echo $!; sleep 100", NULL};
        struct proc_opts o = {.argv = argv, .stdin_fd = -1, .out_fd = -1, .timeout_ms = 300};
        struct proc_result res = {0};
        int64_t t0 = now_ms();
        assert_int_equal(proc_run(&o, &res), 0);
        int64_t took = now_ms() - t0;
        assert_true(took >= 250 && took < 20000);
        assert_true(res.timed_out);
        assert_int_equal(res.exit_code, 128 + SIGKILL);
        int pgid = 0, grandchild = 0;
        assert_int_equal(sscanf(res.output, "%d\n%d", &pgid, &grandchild), 2);
        proc_result_done(&res);
        assert_true(pgid > 1 && grandchild > 1 && grandchild != pgid);
        bool gone = wait_group_gone(pgid, 10000);
        if (!gone)
                kill(-pgid, SIGKILL);
        assert_true(gone);
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/stat", grandchild);
        _cleanup_free_ char *stat = NULL;
        if (read_file(path, 4096, &stat, NULL) == 0) { /* still there: only as a zombie */
                const char *rp = strrchr(stat, ')');
                assert_non_null(rp);
                assert_true(rp[2] == 'Z' || rp[2] == 'X');
        }
}

static void test_proc_spawn_wait_kill(void **state) {
        char *argv[] = {"/bin/sleep", "100", NULL};
        struct proc_opts o = {.argv = argv, .stdin_fd = -1, .out_fd = -1};
        pid_t pid = 0;
        assert_int_equal(proc_spawn(&o, &pid), 0);
        assert_true(pid > 1);
        assert_int_equal(proc_wait(pid, 0), -ETIMEDOUT);
        assert_int_equal(proc_wait(pid, 50), -ETIMEDOUT);
        assert_int_equal(proc_kill_group(pid, SIGTERM), 0);
        assert_int_equal(proc_wait(pid, 10000), 128 + SIGTERM);
        assert_int_equal(proc_wait(pid, 0), -ECHILD);
        assert_int_equal(proc_kill_group(0, SIGKILL), -EINVAL);
        assert_int_equal(proc_kill_group(1, SIGKILL), -EINVAL);
}

static void test_proc_exit_codes(void **state) {
        assert_int_equal(proc_exit_code(W_EXITCODE(0, 0)), 0);
        assert_int_equal(proc_exit_code(W_EXITCODE(3, 0)), 3);
        assert_int_equal(proc_exit_code(W_EXITCODE(255, 0)), 255);
        assert_int_equal(proc_exit_code(SIGSEGV), 128 + SIGSEGV);
        assert_int_equal(proc_exit_code(SIGKILL | 0x80), 128 + SIGKILL); /* core dumped */
        assert_int_equal(proc_exit_code(W_STOPCODE(SIGSTOP)), 255);

        char *term[] = {"/bin/sh", "-c", "kill -TERM $$", NULL};
        struct proc_result res = run(term, NULL);
        assert_int_equal(res.exit_code, 128 + SIGTERM);
        proc_result_done(&res);
        char *killed[] = {"/bin/sh", "-c", "kill -KILL $$", NULL};
        res = run(killed, NULL);
        assert_int_equal(res.exit_code, 128 + SIGKILL);
        proc_result_done(&res);
}

/* ---- strv and small helpers --------------------------------------------- */

/* ---- the one copy of each small helper -------------------------------- */

static int fmt_len(char **ret, const char *fmt, ...) _printf_(2, 3);
static int fmt_len(char **ret, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int k = xvasprintf(ret, fmt, ap);
        va_end(ap);
        return k;
}

static void test_format_helpers(void **state) {
        char *s = NULL;
        assert_int_equal(fmt_len(&s, "%s-%d", "a", 42), 4);
        assert_string_equal(s, "a-42");
        free(s);
        s = NULL;
        assert_int_equal(xasprintf(&s, "%03d", 7), 0);
        assert_string_equal(s, "007");
        free(s);
        char *err = NULL;
        assert_int_equal(errorf(-EINVAL, &err, "bad '%s'", "x"), -EINVAL);
        assert_string_equal(err, "bad 'x'");
        free(err);
        assert_int_equal(errorf(-ENOENT, NULL, "ignored %d", 1), -ENOENT);
}

static void test_percent_decode(void **state) {
        char *s = NULL;
        assert_int_equal(percent_decode("a%2Fb+c%7e", 10, true, &s), 0);
        assert_string_equal(s, "a/b c~");
        free(s);
        assert_int_equal(percent_decode("a+b", 3, false, &s), 0);
        assert_string_equal(s, "a+b");
        free(s);
        s = NULL;
        assert_int_equal(percent_decode("%00", 3, true, &s), -EINVAL);
        assert_int_equal(percent_decode("%4", 2, true, &s), -EINVAL);
        assert_int_equal(percent_decode("%", 1, false, &s), -EINVAL);
        assert_int_equal(percent_decode("%a", 2, false, &s), -EINVAL);
        assert_int_equal(percent_decode("%zz", 3, true, &s), -EINVAL);
        assert_int_equal(percent_decode("a\0b", 3, true, &s), -EINVAL);
        assert_null(s);
}

static void test_read_fd_bounded(void **state) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(write(p[1], "0123456789", 10), 10);
        close(p[1]);
        char *data = NULL;
        size_t len = 0;
        /* No size known (a pipe): grows; exactly max bytes is accepted. */
        assert_int_equal(read_fd_bounded(p[0], 0, 10, &data, &len), 0);
        assert_int_equal(len, 10);
        assert_string_equal(data, "0123456789");
        free(data);
        close(p[0]);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(write(p[1], "0123456789", 10), 10);
        close(p[1]);
        data = NULL;
        assert_int_equal(read_fd_bounded(p[0], 3, 9, &data, &len), -EFBIG);
        assert_null(data);
        close(p[0]);
}

static void test_fd_wait_readable(void **state) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        int64_t t0 = now_ms();
        assert_int_equal(fd_wait_readable(p[0], t0 + 30), -ETIMEDOUT);
        assert_true(now_ms() - t0 >= 30);
        assert_int_equal(fd_wait_readable(p[0], t0 - 1000), -ETIMEDOUT); /* passed: one look */
        assert_int_equal(write(p[1], "x", 1), 1);
        assert_int_equal(fd_wait_readable(p[0], t0 - 1000), 0);          /* ...which sees data */
        assert_int_equal(fd_wait_readable(p[0], INT64_MAX), 0);
        /* headtail_read_fd: everything until EOF, or the deadline. */
        struct headtail h;
        assert_int_equal(headtail_init(&h, 64, 64), 0);
        assert_int_equal(headtail_read_fd(&h, p[0], now_ms() + 20), -ETIMEDOUT);
        assert_int_equal(write(p[1], "yz", 2), 2);
        close(p[1]);
        assert_int_equal(headtail_read_fd(&h, p[0], INT64_MAX), 0);
        char *out = headtail_render(&h);
        assert_string_equal(out, "xyz");
        free(out);
        headtail_free(&h);
        close(p[0]);
}

static void test_strv(void **state) {
        _cleanup_strv_free_ char **v = NULL;
        assert_int_equal(strv_length(v), 0);
        assert_int_equal(strv_push(&v, "a"), 0);
        assert_int_equal(strv_push(&v, ""), 0);
        assert_int_equal(strv_pushf(&v, "%s-%d", "n", 7), 0);
        assert_int_equal(strv_length(v), 3);
        assert_string_equal(v[0], "a");
        assert_string_equal(v[1], "");
        assert_string_equal(v[2], "n-7");
        assert_null(v[3]);
        /* Copies, not borrowed pointers. */
        char mine[] = "mutable";
        assert_int_equal(strv_push(&v, mine), 0);
        mine[0] = 'X';
        assert_string_equal(v[3], "mutable");
        strv_free(NULL);

        assert_true(startswith("seed-kernel", "seed"));
        assert_true(startswith("seed", ""));
        assert_false(startswith("se", "seed"));
        assert_true(endswith("file.yaml", ".yaml"));
        assert_true(endswith("x", ""));
        assert_false(endswith("yaml", ".yaml"));
        assert_true(strempty(NULL));
        assert_true(strempty(""));
        assert_false(strempty("x"));

        _cleanup_free_ char *s = NULL;
        assert_int_equal(xasprintf(&s, "%s:%d", "host", 80), 0);
        assert_string_equal(s, "host:80");

        int64_t a = now_ms(), b = now_ms();
        assert_true(b >= a);
        assert_true(wall_ms() > 1600000000000LL);
}

static void test_secure_zero(void **state) {
        char *p = malloc(64);
        assert_non_null(p);
        memset(p, 'x', 64);
        secure_zero(p, 63);
        for (int i = 0; i < 63; i++)
                assert_int_equal(p[i], 0);
        assert_int_equal(p[63], 'x'); /* exactly n bytes */
        free(p);
        secure_zero(NULL, 10);
}

/* ---- rate-limited log lines ---- */

static void test_log_limiter_counts(void **state) {
        struct log_limiter *l = NULL;
        uint64_t n = 99;
        assert_int_equal(log_limiter_new(60000, &l), 0);
        assert_true(log_limiter_admit(l, "refused %s", "192.0.2.1", 1000, &n));
        assert_int_equal(n, 0);
        for (int i = 0; i < 5000; i++)
                assert_false(log_limiter_admit(l, "refused %s", "192.0.2.1", 1001 + i, &n));
        /* Another client, another reason: lines of their own. */
        assert_true(log_limiter_admit(l, "refused %s", "192.0.2.2", 2000, &n));
        assert_true(log_limiter_admit(l, "other %s", "192.0.2.1", 2000, &n));
        assert_false(log_limiter_admit(l, "refused %s", "192.0.2.1", 60999, &n));
        /* The next interval: one line, with the count of those not written. */
        assert_true(log_limiter_admit(l, "refused %s", "192.0.2.1", 61000, &n));
        assert_int_equal(n, 5001);
        assert_false(log_limiter_admit(l, "refused %s", "192.0.2.1", 61001, &n));
        log_limiter_free(l);
}

static void test_log_limiter_bounded_keys(void **state) {
        struct log_limiter *l = NULL;
        uint64_t n = 0;
        char key[32];
        assert_int_equal(log_limiter_new(60000, &l), 0);
        int lines = 0;
        for (int i = 0; i < 100000; i++) { /* a client per request */
                snprintf(key, sizeof key, "10.%d.%d.%d", i >> 16 & 255, i >> 8 & 255, i & 255);
                lines += log_limiter_admit(l, "refused %s", key, 1000 + i / 100, &n);
        }
        /* Within one interval: a line per tracked key, one for the rest. */
        assert_int_equal(lines, LOG_LIMIT_KEYS + 1);
        /* Another reason still gets its line, even from yet another key. */
        assert_true(log_limiter_admit(l, "the overall limit %s", "", 1500, &n));
        assert_false(log_limiter_admit(l, "the overall limit %s", "", 1501, &n));
        /* Past every per-reason slot too: one line for all the rest. */
        char reason[LOG_LIMIT_REASONS + 8][16];
        lines = 0;
        for (int i = 0; i < LOG_LIMIT_REASONS + 8; i++) {
                snprintf(reason[i], sizeof reason[i], "reason %d", i);
                lines += log_limiter_admit(l, reason[i], "x", 1600, &n);
                lines += log_limiter_admit(l, reason[i], "y", 1600, &n);
        }
        assert_int_equal(lines, LOG_LIMIT_REASONS - 2 + 1);
        log_limiter_free(l);
}

static size_t count_lines(const char *path, const char *needle) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0, n = 0;
        assert_int_equal(read_file(path, 1 << 24, &data, &len), 0);
        for (const char *p = data; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

static void test_log_limited_writes_one_line(void **state) {
        _cleanup_free_ char *path = path_join(tmpdir, "limited.log");
        assert_int_equal(log_open(path, 10u << 20, 3), 0);
        for (int i = 0; i < 10000; i++)
                log_limited(LOG_WARN, "198.51.100.7", "refused a flood request (client %s)", "198.51.100.7");
        log_limited(LOG_WARN, "198.51.100.8", "refused a flood request (client %s)", "198.51.100.8");
        log_close();
        assert_int_equal(count_lines(path, "refused a flood request (client 198.51.100.7)"), 1);
        assert_int_equal(count_lines(path, "refused a flood request (client 198.51.100.8)"), 1);
}

/* A stream copied into a rotated log: long lines cut, the files bounded. */
static void test_rotlog_pump_bounds(void **state) {
        _cleanup_free_ char *src = path_join(tmpdir, "pump-src"), *dst = path_join(tmpdir, "pump.log");
        size_t line = 100000, lines = 300;
        _cleanup_free_ char *data = malloc(line * lines);
        assert_non_null(data);
        memset(data, 'z', line * lines);
        for (size_t i = 1; i <= lines; i++)
                data[i * line - 1] = '\n';
        assert_int_equal(write_file_atomic(src, data, line * lines, 0600), 0);
        struct rotlog *l = NULL;
        assert_int_equal(rotlog_open(dst, 64 * 1024, 2, &l), 0);
        int fd = open(src, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        rotlog_pump(l, fd, 4096);
        close(fd);
        rotlog_free(l);
        struct stat st;
        assert_int_equal(stat(dst, &st), 0);
        assert_true(st.st_size <= 64 * 1024);
        _cleanup_free_ char *one = NULL, *two = NULL, *three = NULL;
        assert_true(xasprintf(&one, "%s.1", dst) >= 0 && xasprintf(&two, "%s.2", dst) >= 0 &&
                    xasprintf(&three, "%s.3", dst) >= 0);
        assert_int_equal(stat(one, &st), 0);
        assert_true(st.st_size <= 64 * 1024);
        assert_false(path_exists(three));
        assert_int_equal(count_lines(dst, "[... 95903 bytes not logged]\n"), count_lines(dst, "\n"));
}

static int setup(void **state) {
        if (!mkdtemp(tmpdir))
                return -1;
        return 0;
}

static int teardown(void **state) {
        return rm_rf(tmpdir) < 0 ? -1 : 0;
}

/* The shared watch: its count stands while nothing watched changes, moves
 * at once after a change (before the writer's call returned), once for a
 * burst drained together; two watchers of one inode keep both their masks;
 * without inotify it moves on every call. */
static void test_fswatch(void **state) {
        (void)state;
        char dir[] = "/tmp/test-base-fswatch.XXXXXX";
        assert_non_null(mkdtemp(dir));
        char file[64], sub[64];
        snprintf(file, sizeof file, "%s/f", dir);
        snprintf(sub, sizeof sub, "%s/sub", dir);
        assert_int_equal(write_file_atomic(file, "1", 1, 0644), 0);

        struct fswatch w;
        assert_int_equal(fswatch_init(&w), 0);
        assert_true(w.fd >= 0);
        assert_int_equal(fswatch_add(&w, sub, IN_CREATE), -ENOENT);
        assert_int_equal(fswatch_add(&w, dir, IN_CREATE | IN_ONLYDIR), 0);
        assert_int_equal(fswatch_add(&w, dir, IN_ATTRIB | IN_ONLYDIR), 0); /* added to, not replacing */
        assert_int_equal(fswatch_add(&w, file, IN_MODIFY), 0);
        uint64_t v = fswatch_changes(&w);
        assert_true(v != 0);
        assert_int_equal(fswatch_changes(&w), v);

        int fd = open(file, O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        for (int i = 0; i < 5; i++)
                assert_int_equal(write(fd, "x", 1), 1);
        close(fd);
        uint64_t after = fswatch_changes(&w);
        assert_int_equal(after, v + 1);
        assert_int_equal(fswatch_changes(&w), after);

        assert_int_equal(mkdir(sub, 0755), 0); /* IN_CREATE */
        assert_true(fswatch_changes(&w) > after);
        after = fswatch_changes(&w);
        assert_int_equal(chmod(dir, 0711), 0); /* IN_ATTRIB, the second mask */
        assert_true(fswatch_changes(&w) > after);
        after = fswatch_changes(&w);
        char *got = NULL;
        size_t len = 0;
        assert_int_equal(read_file(file, 64, &got, &len), 0); /* opened, read: not asked for */
        free(got);
        assert_int_equal(fswatch_changes(&w), after);
        fswatch_done(&w);
        fswatch_done(&w); /* twice: nothing */

        /* Without a queue: nothing to add, a new count on every call. */
        assert_int_equal(fswatch_init(&w), 0);
        close(w.fd);
        w.fd = -1;
        assert_int_equal(fswatch_add(&w, dir, IN_CREATE), -EBADF);
        v = fswatch_changes(&w);
        assert_true(fswatch_changes(&w) != v);
        fswatch_done(&w);
        rmdir(sub);
        unlink(file);
        rmdir(dir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_buf_cap),
                cmocka_unit_test(test_fswatch),
                cmocka_unit_test(test_log_limiter_counts),
                cmocka_unit_test(test_log_limiter_bounded_keys),
                cmocka_unit_test(test_log_limited_writes_one_line),
                cmocka_unit_test(test_rotlog_pump_bounds),
                cmocka_unit_test(test_buf_grow_and_printf),
                cmocka_unit_test(test_buf_steal),
                cmocka_unit_test(test_headtail_head_only),
                cmocka_unit_test(test_headtail_nul_bytes),
                cmocka_unit_test(test_utf8_and_hex),
                cmocka_unit_test(test_headtail_head_and_tail),
                cmocka_unit_test(test_headtail_tiny_and_zero_tail),
                cmocka_unit_test(test_crypto_hex_and_hashes),
                cmocka_unit_test(test_crypto_hmac_keys),
                cmocka_unit_test(test_crypto_random),
                cmocka_unit_test(test_crypto_streq_ct),
                cmocka_unit_test(test_read_file),
                cmocka_unit_test(test_read_file_refuses_non_regular),
                cmocka_unit_test(test_write_file_atomic),
                cmocka_unit_test(test_write_file_atomic_concurrent),
                cmocka_unit_test(test_mkdir_helpers),
                cmocka_unit_test(test_rm_rf_does_not_follow_symlinks),
                cmocka_unit_test(test_path_helpers),
                cmocka_unit_test(test_proc_run_captures),
                cmocka_unit_test(test_proc_caps_output),
                cmocka_unit_test(test_proc_stdin_cwd_out_fd),
                cmocka_unit_test(test_proc_exact_environment),
                cmocka_unit_test(test_proc_fds),
                cmocka_unit_test(test_proc_fds_without_close_range),
                cmocka_unit_test(test_proc_new_session),
                cmocka_unit_test(test_proc_timeout_kills_group),
                cmocka_unit_test(test_proc_spawn_wait_kill),
                cmocka_unit_test(test_proc_exit_codes),
                cmocka_unit_test(test_format_helpers),
                cmocka_unit_test(test_percent_decode),
                cmocka_unit_test(test_read_fd_bounded),
                cmocka_unit_test(test_fd_wait_readable),
                cmocka_unit_test(test_strv),
                cmocka_unit_test(test_secure_zero),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
