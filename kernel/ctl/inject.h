/* inject.h — the one script tag the kernel adds to the organism's pages: the
 * owner's badge (seed 001, "The owner's badge"; ctl/badge.h).
 *
 * Two pure parts, so tests and the fuzzer reach them without a server:
 *  - ctl_inject_wanted() decides from the request and the organism's response
 *    head whether an answer is rewritten at all: only GET top-level
 *    navigations (Sec-Fetch-Dest: document and Sec-Fetch-Mode: navigate; a
 *    browser that sends no Fetch Metadata gets nothing added), only a 200
 *    with a body, Content-Type text/html, no Content-Encoding (or
 *    "identity"), no Content-Range, and a Content-Length, when there is one,
 *    under CTL_INJECT_MAX. The admin screens' origin (organism.localhost) and
 *    every /_seed path are never proxied through here: the caller checks the
 *    host, the switch in Settings and the path.
 *  - struct ctl_inject scans a streamed body (any split: a tag cut across
 *    chunks is carried in its state, never in a buffer) for the place of the
 *    tag: right after the start tag of <head>, else after that of <body>;
 *    comments, doctype and other markup are stepped over, and "<head" inside
 *    an attribute value or a comment does not count. The text of raw text
 *    and RCDATA elements (script, style, title, textarea, noscript, xmp,
 *    iframe, noembed, noframes) runs to their own end tag, as in HTML's
 *    tokenizer: a "</head>" or "<body" in an inline script is not the page's
 *    (one known difference: a script's "<!--<script>" double-escaped text is
 *    read as ending at the first "</script>"). A document with neither gets
 *    the tag at its end (the HTML parser puts a trailing script into the
 *    body) — unless it ends inside raw text or <plaintext>, where a tag at the
 *    end would be text, not a script: then nothing is added. Past
 *    CTL_INJECT_MAX bytes without a place the scan gives up and nothing is
 *    added. Nothing here allocates or logs. */
#pragma once

#include "base/base.h"
#include "ctl/http.h"

#define CTL_INJECT_MAX (8u * 1024 * 1024) /* only pages under 8 MB are rewritten */
#define CTL_INJECT_TAG "<script src=\"/_seed/badge.js\" async></script>"
/* The preview bar's (ctl/preview.h), on the candidate's pages in the owner's
 * previewing browser; with the badge's when both are on. */
#define CTL_INJECT_PREVIEW_TAG "<script src=\"/_seed/preview/bar.js\" async></script>"

/* Whether this answer gets the tag (see above). req: the browser's request
 * headers; up: the organism's response headers; has_body: its framing says a
 * body follows. */
bool ctl_inject_wanted(const char *method, const struct ctl_hdrs *req, int status, const struct ctl_hdrs *up,
                       bool has_body);

enum ctl_inject_verdict {
        CTL_INJECT_MORE,     /* no place yet: feed the next piece */
        CTL_INJECT_HERE,     /* insert the tag at *ret_at of this piece */
        CTL_INJECT_GIVE_UP,  /* past CTL_INJECT_MAX: add nothing */
};

struct ctl_inject {
        int state;           /* the tokenizer's state (inject.c) */
        char name[10];       /* the tag name read so far, lowercased */
        uint8_t name_len;
        char quote;          /* inside an attribute value: its quote */
        uint8_t dashes;      /* "-" seen in a row (comments) */
        bool target;         /* the tag being read is <head> or <body> */
        uint8_t raw;         /* the raw text element being read or in: 1 + its index in inject.c's table, 0 none */
        uint8_t matched;     /* raw text: bytes of "</name" matched so far */
        uint64_t scanned;
        bool done;           /* a verdict other than MORE was given */
};

void ctl_inject_init(struct ctl_inject *s);
/* Scans the next n bytes of the body. CTL_INJECT_HERE with *ret_at (0..n):
 * the tag goes before data[*ret_at]. Once HERE or GIVE_UP was returned, every
 * further call returns GIVE_UP (one tag per page). */
enum ctl_inject_verdict ctl_inject_feed(struct ctl_inject *s, const char *data, size_t n, size_t *ret_at);
/* At the end of the body: whether the tag goes at the end (no place was
 * found within CTL_INJECT_MAX bytes, nothing was added yet, and the page does
 * not end inside raw text). */
bool ctl_inject_at_end(const struct ctl_inject *s);
