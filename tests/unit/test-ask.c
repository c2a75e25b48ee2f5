/* Unit tests of point and ask's pictures: the PNG and JPEG checks
 * (ask/image.h) and the draft store's limits (ask/drafts.h), its clock
 * passed in, so 30 minutes take no time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "ask/drafts.h"
#include "ask/image.h"
#include "base/buf.h"

static void put32(uint8_t *p, uint32_t v) {
        p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}

/* A PNG head (signature, IHDR) with an IEND; pad bytes of IDAT-ish filler
 * in between (the check does not read them). Caller frees. */
static uint8_t *png(uint32_t w, uint32_t h, uint8_t depth, uint8_t type, size_t pad, size_t *ret_len) {
        static const uint8_t sig[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
        static const uint8_t iend[] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
        size_t n = 8 + 25 + pad + sizeof iend;
        uint8_t *p = calloc(1, n);
        assert_non_null(p);
        memcpy(p, sig, 8);
        put32(p + 8, 13);
        memcpy(p + 12, "IHDR", 4);
        put32(p + 16, w);
        put32(p + 20, h);
        p[24] = depth, p[25] = type;
        memcpy(p + n - sizeof iend, iend, sizeof iend);
        *ret_len = n;
        return p;
}

/* SOI, an APP0 segment, a SOF0 frame header, EOI. Caller frees. */
static uint8_t *jpeg(uint16_t w, uint16_t h, uint8_t sof, size_t *ret_len) {
        static const uint8_t app0[] = {0xff, 0xe0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0};
        uint8_t frame[] = {0xff, sof, 0x00, 0x11, 8, h >> 8, h & 0xff, w >> 8, w & 0xff, 3,
                           1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1};
        size_t n = 2 + sizeof app0 + sizeof frame + 2;
        uint8_t *p = malloc(n);
        assert_non_null(p);
        p[0] = 0xff, p[1] = 0xd8;
        memcpy(p + 2, app0, sizeof app0);
        memcpy(p + 2 + sizeof app0, frame, sizeof frame);
        p[n - 2] = 0xff, p[n - 1] = 0xd9;
        *ret_len = n;
        return p;
}

static void test_png(void **state) {
        (void)state;
        struct ask_image_info info = {0};
        size_t n;
        _cleanup_free_ uint8_t *ok = png(640, 480, 8, 6, 100, &n);
        assert_int_equal(ask_image_check(ok, n, &info), 0);
        assert_string_equal(info.media_type, "image/png");
        assert_int_equal(info.width, 640);
        assert_int_equal(info.height, 480);

        _cleanup_free_ uint8_t *side = png(4096, 4096, 8, 2, 0, &n);
        assert_int_equal(ask_image_check(side, n, &info), 0);
        _cleanup_free_ uint8_t *wide = png(4097, 10, 8, 2, 0, &n);
        assert_int_equal(ask_image_check(wide, n, &info), -ERANGE);
        _cleanup_free_ uint8_t *tall = png(10, 4097, 8, 2, 0, &n);
        assert_int_equal(ask_image_check(tall, n, &info), -ERANGE);
        _cleanup_free_ uint8_t *empty = png(0, 10, 8, 2, 0, &n);
        assert_int_equal(ask_image_check(empty, n, &info), -ERANGE);
        _cleanup_free_ uint8_t *huge = png(0x80000000u, 10, 8, 2, 0, &n);
        assert_int_equal(ask_image_check(huge, n, &info), -EBADMSG);
        _cleanup_free_ uint8_t *depth = png(10, 10, 3, 2, 0, &n);
        assert_int_equal(ask_image_check(depth, n, &info), -EBADMSG);

        _cleanup_free_ uint8_t *cut = png(10, 10, 8, 6, 50, &n);
        assert_int_equal(ask_image_check(cut, n - 1, &info), -EBADMSG); /* no IEND at the end */
        cut[12] = 'X'; /* first chunk is not IHDR */
        assert_int_equal(ask_image_check(cut, n, &info), -EBADMSG);
        assert_int_equal(ask_image_check(ok, 20, &info), -EBADMSG);

        /* 3 MB and no more */
        _cleanup_free_ uint8_t *max = png(100, 100, 8, 6, ASK_IMAGE_MAX - 8 - 25 - 12, &n);
        assert_int_equal(n, ASK_IMAGE_MAX);
        assert_int_equal(ask_image_check(max, n, &info), 0);
        _cleanup_free_ uint8_t *over = png(100, 100, 8, 6, ASK_IMAGE_MAX - 8 - 25 - 12 + 1, &n);
        assert_int_equal(ask_image_check(over, n, &info), -E2BIG);
        assert_non_null(ask_image_refusal(-E2BIG));
}

static void test_jpeg_and_others(void **state) {
        (void)state;
        struct ask_image_info info = {0};
        size_t n;
        _cleanup_free_ uint8_t *ok = jpeg(800, 600, 0xc0, &n);
        assert_int_equal(ask_image_check(ok, n, &info), 0);
        assert_string_equal(info.media_type, "image/jpeg");
        assert_int_equal(info.width, 800);
        assert_int_equal(info.height, 600);
        _cleanup_free_ uint8_t *prog = jpeg(1, 1, 0xc2, &n);
        assert_int_equal(ask_image_check(prog, n, &info), 0);
        _cleanup_free_ uint8_t *wide = jpeg(5000, 10, 0xc0, &n);
        assert_int_equal(ask_image_check(wide, n, &info), -ERANGE);
        _cleanup_free_ uint8_t *zero = jpeg(10, 0, 0xc0, &n);
        assert_int_equal(ask_image_check(zero, n, &info), -ERANGE);
        _cleanup_free_ uint8_t *dht = jpeg(10, 10, 0xc4, &n); /* no frame header before the end */
        assert_int_equal(ask_image_check(dht, n, &info), -EBADMSG);
        _cleanup_free_ uint8_t *noend = jpeg(10, 10, 0xc0, &n);
        assert_int_equal(ask_image_check(noend, n - 1, &info), -EBADMSG);
        noend[4] = 0xff, noend[5] = 0xff; /* a segment length past the end */
        assert_int_equal(ask_image_check(noend, n, &info), -EBADMSG);

        static const uint8_t gif[] = "GIF89a\x01\x00\x01\x00";
        assert_int_equal(ask_image_check(gif, sizeof gif - 1, &info), -EMEDIUMTYPE);
        static const uint8_t svg[] = "<svg xmlns='http://www.w3.org/2000/svg'/>";
        assert_int_equal(ask_image_check(svg, sizeof svg - 1, &info), -EMEDIUMTYPE);
        assert_int_equal(ask_image_check("", 0, &info), -EMEDIUMTYPE);
        assert_int_equal(ask_image_check(NULL, 0, &info), -EMEDIUMTYPE);
}

static void test_drafts(void **state) {
        (void)state;
        struct ask_drafts *d = NULL;
        assert_int_equal(ask_drafts_new(ASK_DRAFT_TTL_MS + 1, &d), -EINVAL);
        assert_int_equal(ask_drafts_new(0, &d), 0);
        size_t n;
        _cleanup_free_ uint8_t *p = png(10, 10, 8, 6, 0, &n);
        char ids[ASK_DRAFTS_MAX + 1][ASK_DRAFT_ID_LEN + 1];
        int64_t t = 1000;
        /* Not a picture: refused, nothing kept. */
        assert_int_equal(ask_drafts_add(d, "hello", 5, t, ids[0]), -EMEDIUMTYPE);
        assert_int_equal(ask_drafts_count(d, t), 0);
        /* At most 8: the ninth pushes out the oldest. */
        for (size_t i = 0; i <= ASK_DRAFTS_MAX; i++) {
                assert_int_equal(ask_drafts_add(d, p, n, t + (int64_t)i, ids[i]), 0);
                assert_true(ask_draft_id_valid(ids[i]));
        }
        assert_int_equal(ask_drafts_count(d, t + 10), ASK_DRAFTS_MAX);
        struct ask_draft got = {0};
        assert_int_equal(ask_drafts_get(d, ids[0], t + 10, &got), -ENOENT);
        assert_int_equal(ask_drafts_get(d, ids[1], t + 10, &got), 0);
        assert_int_equal(got.len, n);
        assert_memory_equal(got.data, p, n);
        assert_string_equal(got.info.media_type, "image/png");
        ask_draft_done(&got);
        /* A take is one use. */
        assert_int_equal(ask_drafts_take(d, ids[1], t + 10, &got), 0);
        ask_draft_done(&got);
        assert_int_equal(ask_drafts_take(d, ids[1], t + 10, &got), -ENOENT);
        /* Unknown or malformed ids. */
        assert_int_equal(ask_drafts_get(d, "../../etc", t, &got), -ENOENT);
        assert_int_equal(ask_drafts_get(d, NULL, t, &got), -ENOENT);
        assert_false(ask_draft_id_valid("ABCDEF0123456789abcdef0123456789"));
        /* 30 minutes later every draft is gone. */
        assert_int_equal(ask_drafts_get(d, ids[2], t + 2 + ASK_DRAFT_TTL_MS - 1, &got), 0);
        ask_draft_done(&got);
        assert_int_equal(ask_drafts_get(d, ids[2], t + 2 + ASK_DRAFT_TTL_MS, &got), -ENOENT);
        assert_int_equal(ask_drafts_count(d, t + 100 + ASK_DRAFT_TTL_MS), 0);
        ask_drafts_free(d);

        /* A shorter ttl (server.ask_draft_seconds). */
        assert_int_equal(ask_drafts_new(2000, &d), 0);
        assert_int_equal(ask_drafts_add(d, p, n, t, ids[0]), 0);
        assert_int_equal(ask_drafts_get(d, ids[0], t + 1999, &got), 0);
        ask_draft_done(&got);
        assert_int_equal(ask_drafts_get(d, ids[0], t + 2000, &got), -ENOENT);
        ask_drafts_free(d);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_png),
                cmocka_unit_test(test_jpeg_and_others),
                cmocka_unit_test(test_drafts),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
