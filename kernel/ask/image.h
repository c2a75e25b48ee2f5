/* image.h — what a picture the owner's browser uploads must be before the
 * kernel keeps it (seed 001, point and ask): a real PNG or JPEG, checked by
 * its bytes (magic, header, end), never by what the browser says it is, at
 * most ASK_IMAGE_MAX bytes and ASK_IMAGE_SIDE_MAX pixels per side. A pure
 * parser of outside input: no allocation, no logging; fuzzed
 * (tests/fuzz/fuzz-ask-image.c). */
#pragma once

#include "base/base.h"

#define ASK_IMAGE_MAX (3u * 1024 * 1024)
#define ASK_IMAGE_SIDE_MAX 4096u

struct ask_image_info {
        const char *media_type;   /* static: "image/png" or "image/jpeg" */
        uint32_t width, height;
};

/* Checks data: a PNG (signature, IHDR first with a valid bit depth and
 * colour type, IEND last) or a baseline/progressive JPEG (SOI, segments up to
 * a frame header SOFn, EOI last), 1 to ASK_IMAGE_SIDE_MAX pixels each side.
 * -E2BIG past ASK_IMAGE_MAX, -EMEDIUMTYPE for neither format, -EBADMSG for a
 * malformed one, -ERANGE for a side out of bounds. *ret written on success
 * only. */
int ask_image_check(const void *data, size_t len, struct ask_image_info *ret);
/* A short reason for an error of ask_image_check(), for the owner. */
const char *ask_image_refusal(int error);
