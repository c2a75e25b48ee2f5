/* fuzz-ask-image.c — point and ask's picture check (kernel/ask/image.c) on
 * arbitrary bytes. An accepted picture must be what it says: a PNG or JPEG
 * signature, sides within 1..ASK_IMAGE_SIDE_MAX, at most ASK_IMAGE_MAX bytes;
 * a refusal is one of the documented errors and has a reason. The draft
 * store then keeps exactly the accepted ones. */
#include "ask/drafts.h"
#include "ask/image.h"

#include <stdint.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct ask_image_info info = {.media_type = NULL};
        int r = ask_image_check(data, size, &info);
        if (r == 0) {
                check(size <= ASK_IMAGE_MAX);
                check(info.width >= 1 && info.width <= ASK_IMAGE_SIDE_MAX);
                check(info.height >= 1 && info.height <= ASK_IMAGE_SIDE_MAX);
                check(streq(info.media_type, "image/png") ? data[0] == 0x89 : data[0] == 0xff && data[1] == 0xd8);
        } else {
                check(r == -E2BIG || r == -EMEDIUMTYPE || r == -EBADMSG || r == -ERANGE);
                check(info.media_type == NULL);
                check(ask_image_refusal(r) != NULL);
        }
        struct ask_drafts *d = NULL;
        char id[ASK_DRAFT_ID_LEN + 1];
        check(ask_drafts_new(0, &d) == 0);
        int a = ask_drafts_add(d, data, size, 0, id);
        check(a == r || (a == -ENOMEM && r == 0));
        check(ask_drafts_count(d, 0) == (a == 0 ? 1u : 0u));
        ask_drafts_free(d);
        return 0;
}
