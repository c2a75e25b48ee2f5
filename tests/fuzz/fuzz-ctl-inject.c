/* fuzz-ctl-inject.c — where the badge's script tag goes in a streamed page
 * (kernel/ctl/inject.c), on arbitrary bytes. The first byte splits the rest
 * into two pieces: the place found must not depend on the split, must lie
 * within the bytes fed, and one tag at most is ever placed; a page gets no
 * tag only when it has a raw text element (one left open swallows the end). */
#include "ctl/inject.h"

#include <stdint.h>
#include <strings.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

/* The offset in doc of the tag (n for "at the end", SIZE_MAX for none). */
static size_t place(const char *doc, size_t n, size_t split) {
        struct ctl_inject s;
        ctl_inject_init(&s);
        size_t at = SIZE_MAX, found = SIZE_MAX;
        const size_t pieces[2][2] = {{0, split}, {split, n - split}};
        for (size_t i = 0; i < 2; i++) {
                enum ctl_inject_verdict v = ctl_inject_feed(&s, doc + pieces[i][0], pieces[i][1], &at);
                if (v == CTL_INJECT_HERE) {
                        check(found == SIZE_MAX);
                        check(at <= pieces[i][1] && at >= 1);
                        found = pieces[i][0] + at;
                } else if (found != SIZE_MAX)
                        check(v == CTL_INJECT_GIVE_UP);
        }
        if (found == SIZE_MAX && ctl_inject_at_end(&s))
                found = n;
        return found;
}

/* Whether doc has "<" and one of the raw text elements' names, any case. */
static bool has_raw_start(const char *doc, size_t n) {
        static const char *const names[] = {"script", "style", "title", "textarea", "noscript",
                                            "xmp", "iframe", "noembed", "noframes", "plaintext"};
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; doc[i] == '<' && k < sizeof names / sizeof names[0]; k++) {
                        size_t len = strlen(names[k]);
                        if (n - i - 1 >= len && strncasecmp(doc + i + 1, names[k], len) == 0)
                                return true;
                }
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        const char *doc = (const char *)data + 1;
        size_t n = size - 1, split = n ? data[0] % (n + 1) : 0;
        size_t whole = place(doc, n, n), parts = place(doc, n, split);
        check(whole == parts);
        /* under CTL_INJECT_MAX there is always a place, but in raw text */
        check(whole != SIZE_MAX || has_raw_start(doc, n));
        if (whole < n)
                check(doc[whole - 1] == '>');
        return 0;
}
