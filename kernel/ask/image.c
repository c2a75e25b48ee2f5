/* image.c — PNG and JPEG headers, checked. See image.h. */
#include "ask/image.h"

static uint32_t be32(const uint8_t *p) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t be16(const uint8_t *p) {
        return (uint16_t)(p[0] << 8 | p[1]);
}

static int sides(uint32_t w, uint32_t h, const char *type, struct ask_image_info *ret) {
        if (w == 0 || h == 0 || w > ASK_IMAGE_SIDE_MAX || h > ASK_IMAGE_SIDE_MAX)
                return -ERANGE;
        *ret = (struct ask_image_info){.media_type = type, .width = w, .height = h};
        return 0;
}

/* Bit depths each PNG colour type allows (PNG §11.2.2). */
static bool png_depth_ok(uint8_t type, uint8_t depth) {
        switch (type) {
        case 0:
                return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
        case 3:
                return depth == 1 || depth == 2 || depth == 4 || depth == 8;
        case 2:
        case 4:
        case 6:
                return depth == 8 || depth == 16;
        }
        return false;
}

static int png_check(const uint8_t *p, size_t len, struct ask_image_info *ret) {
        static const uint8_t iend[] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
        /* signature 8 + IHDR (4 length, 4 type, 13 data, 4 crc) + IEND 12 */
        if (len < 8 + 25 + sizeof iend)
                return -EBADMSG;
        if (be32(p + 8) != 13 || memcmp(p + 12, "IHDR", 4) != 0)
                return -EBADMSG;
        const uint8_t *h = p + 16;
        if (!png_depth_ok(h[9], h[8]) || h[10] != 0 || h[11] != 0 || h[12] > 1)
                return -EBADMSG;
        if (memcmp(p + len - sizeof iend, iend, sizeof iend) != 0)
                return -EBADMSG;
        if (be32(h) > INT32_MAX || be32(h + 4) > INT32_MAX)
                return -EBADMSG;
        return sides(be32(h), be32(h + 4), "image/png", ret);
}

/* Start-of-frame markers: C0–CF but DHT (C4), JPG (C8) and DAC (CC). */
static bool jpeg_is_sof(uint8_t m) {
        return m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc;
}

static int jpeg_check(const uint8_t *p, size_t len, struct ask_image_info *ret) {
        if (len < 4 || p[len - 2] != 0xff || p[len - 1] != 0xd9)
                return -EBADMSG;
        size_t i = 2;
        for (unsigned segments = 0; segments < 1024; segments++) {
                while (i < len && p[i] == 0xff) /* fill bytes before a marker */
                        i++;
                if (i >= len || i < 3 || p[i - 1] != 0xff)
                        return -EBADMSG;
                uint8_t m = p[i++];
                if (m == 0x01 || (m >= 0xd0 && m <= 0xd7))
                        continue; /* markers without a length */
                if (m == 0xd8 || m == 0xd9 || m == 0xda || m == 0x00)
                        return -EBADMSG; /* image data (or the end) before any frame header */
                if (i + 2 > len)
                        return -EBADMSG;
                size_t seg = be16(p + i);
                if (seg < 2 || i + seg > len)
                        return -EBADMSG;
                if (jpeg_is_sof(m)) {
                        if (seg < 8 || p[i + 2] == 0)
                                return -EBADMSG; /* precision 0 */
                        return sides(be16(p + i + 5), be16(p + i + 3), "image/jpeg", ret);
                }
                i += seg;
        }
        return -EBADMSG;
}

int ask_image_check(const void *data, size_t len, struct ask_image_info *ret) {
        static const uint8_t png_sig[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
        const uint8_t *p = data;
        if (len > ASK_IMAGE_MAX)
                return -E2BIG;
        if (p && len >= sizeof png_sig && memcmp(p, png_sig, sizeof png_sig) == 0)
                return png_check(p, len, ret);
        if (p && len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
                return jpeg_check(p, len, ret);
        return -EMEDIUMTYPE;
}

const char *ask_image_refusal(int error) {
        switch (error) {
        case -E2BIG:
                return "the picture is larger than 3 MB";
        case -EMEDIUMTYPE:
                return "the picture is neither a PNG nor a JPEG";
        case -ERANGE:
                return "the picture is wider or taller than 4096 pixels (or empty)";
        default:
                return "the picture is not a well-formed PNG or JPEG";
        }
}
