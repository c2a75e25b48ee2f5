/* inject.c — where the badge's script tag goes, and whether. See inject.h. */
#include "ctl/inject.h"

#include <strings.h>

/* The media type of a Content-Type value (before ';', trimmed) is t. */
static bool media_type_is(const char *value, const char *t) {
        if (!value)
                return false;
        while (*value == ' ' || *value == '\t')
                value++;
        size_t n = strcspn(value, ";");
        while (n > 0 && (value[n - 1] == ' ' || value[n - 1] == '\t'))
                n--;
        return n == strlen(t) && strncasecmp(value, t, n) == 0;
}

static bool identity_or_none(const struct ctl_hdrs *up) {
        for (size_t i = 0; i < up->n; i++)
                if (strcasecmp(up->v[i].name, "Content-Encoding") == 0 && !media_type_is(up->v[i].value, "identity"))
                        return false;
        return true;
}

/* No Content-Length, or exactly one that is plain decimal under the limit. */
static bool length_fits(const struct ctl_hdrs *up) {
        size_t n = ctl_hdrs_count(up, "Content-Length");
        if (n == 0)
                return true;
        const char *v = ctl_hdrs_get(up, "Content-Length");
        size_t k = strlen(v);
        if (n != 1 || k == 0 || k > 9 || strspn(v, "0123456789") != k)
                return false;
        return strtoull(v, NULL, 10) < CTL_INJECT_MAX;
}

bool ctl_inject_wanted(const char *method, const struct ctl_hdrs *req, int status, const struct ctl_hdrs *up,
                       bool has_body) {
        const char *dest = ctl_hdrs_get(req, "Sec-Fetch-Dest"), *mode = ctl_hdrs_get(req, "Sec-Fetch-Mode");
        return method && streq(method, "GET") && has_body && status == 200 && dest && streq(dest, "document") &&
               mode && streq(mode, "navigate") && ctl_hdrs_count(req, "Sec-Fetch-Dest") == 1 &&
               ctl_hdrs_count(up, "Content-Type") == 1 && media_type_is(ctl_hdrs_get(up, "Content-Type"), "text/html") &&
               identity_or_none(up) && !ctl_hdrs_get(up, "Content-Range") && length_fits(up);
}

/* The tokenizer: just enough of HTML's to find the first <head> or <body>
 * start tag outside comments and other markup. */
enum {
        S_TEXT,
        S_LT,         /* after '<' */
        S_NAME,       /* reading a start tag's name */
        S_ATTRS,      /* inside a start or end tag, after its name */
        S_BANG,       /* after "<!" */
        S_BANG_DASH,  /* after "<!-" */
        S_COMMENT,    /* inside <!-- … */
        S_MARKUP,     /* <!doctype …>, <?…>, </…>: up to '>' */
        S_RAW,        /* inside a raw text element: up to "</name" and a space, '/' or '>' */
        S_PLAINTEXT,  /* after <plaintext>: text to the end, no markup ever again */
};

/* The elements whose text HTML's tokenizer reads as raw text or RCDATA
 * (noscript too: the browser runs scripts); <plaintext> never ends. */
static const char *const raw_elements[] = {
        "script", "style", "title", "textarea", "noscript", "xmp", "iframe", "noembed", "noframes", "plaintext",
};
#define PLAINTEXT_RAW ARRAY_SIZE(raw_elements) /* raw of <plaintext> */

/* 1 + the index of the tag name just read in raw_elements, or 0. */
static uint8_t raw_of(const struct ctl_inject *s) {
        for (size_t i = 0; i < ARRAY_SIZE(raw_elements); i++)
                if (s->name_len == strlen(raw_elements[i]) && memcmp(s->name, raw_elements[i], s->name_len) == 0)
                        return (uint8_t)(i + 1);
        return 0;
}

void ctl_inject_init(struct ctl_inject *s) {
        *s = (struct ctl_inject){.state = S_TEXT};
}

static bool is_alpha(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_space(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

/* One byte; true when the tag goes right after it. */
static bool step(struct ctl_inject *s, char c) {
        switch (s->state) {
        case S_TEXT:
                if (c == '<')
                        s->state = S_LT;
                return false;
        case S_LT:
                if (is_alpha(c)) {
                        s->name[0] = (char)(c | 0x20);
                        s->name_len = 1;
                        s->state = S_NAME;
                } else if (c == '!')
                        s->state = S_BANG;
                else if (c == '/' || c == '?')
                        s->state = S_MARKUP;
                else
                        s->state = c == '<' ? S_LT : S_TEXT;
                return false;
        case S_NAME:
                if (is_space(c) || c == '/' || c == '>') {
                        s->target = (s->name_len == 4 && (memcmp(s->name, "head", 4) == 0 ||
                                                          memcmp(s->name, "body", 4) == 0));
                        s->raw = raw_of(s);
                        s->quote = 0;
                        s->state = S_ATTRS;
                        return step(s, c);
                }
                if (s->name_len < sizeof s->name)
                        s->name[s->name_len] = (char)(c >= 'A' && c <= 'Z' ? c | 0x20 : c);
                if (s->name_len < UINT8_MAX)
                        s->name_len++;
                return false;
        case S_ATTRS:
                if (s->quote) {
                        if (c == s->quote)
                                s->quote = 0;
                        return false;
                }
                if (c == '"' || c == '\'')
                        s->quote = c;
                else if (c == '>') {
                        s->state = s->raw == PLAINTEXT_RAW ? S_PLAINTEXT : s->raw ? S_RAW : S_TEXT;
                        s->matched = 0;
                        return s->target;
                }
                return false;
        case S_RAW: {
                const char *name = raw_elements[s->raw - 1];
                size_t end = 2 + strlen(name); /* "</" and the name */
                if (s->matched == end) {
                        if (is_space(c) || c == '/' || c == '>') {
                                s->raw = 0;
                                s->state = c == '>' ? S_TEXT : S_MARKUP;
                                return false;
                        }
                        s->matched = 0;
                }
                char want = s->matched < 2 ? "</"[s->matched] : name[s->matched - 2];
                if ((c >= 'A' && c <= 'Z' ? c | 0x20 : c) == want)
                        s->matched++;
                else
                        s->matched = c == '<' ? 1 : 0;
                return false;
        }
        case S_PLAINTEXT:
                return false;
        case S_BANG:
                s->state = c == '-' ? S_BANG_DASH : c == '>' ? S_TEXT : S_MARKUP;
                return false;
        case S_BANG_DASH:
                s->state = c == '-' ? S_COMMENT : c == '>' ? S_TEXT : S_MARKUP;
                s->dashes = 0;
                return false;
        case S_COMMENT:
                if (c == '>' && s->dashes >= 2)
                        s->state = S_TEXT;
                s->dashes = c == '-' ? (uint8_t)(s->dashes < 2 ? s->dashes + 1 : 2) : 0;
                return false;
        case S_MARKUP:
                if (c == '>')
                        s->state = S_TEXT;
                return false;
        }
        return false;
}

enum ctl_inject_verdict ctl_inject_feed(struct ctl_inject *s, const char *data, size_t n, size_t *ret_at) {
        if (s->done)
                return CTL_INJECT_GIVE_UP;
        for (size_t i = 0; i < n; i++) {
                if (s->scanned >= CTL_INJECT_MAX) {
                        s->done = true;
                        return CTL_INJECT_GIVE_UP;
                }
                s->scanned++;
                if (step(s, data[i])) {
                        s->done = true;
                        *ret_at = i + 1;
                        return CTL_INJECT_HERE;
                }
                if (s->state == S_PLAINTEXT) {
                        s->done = true; /* no markup can follow */
                        return CTL_INJECT_GIVE_UP;
                }
        }
        return CTL_INJECT_MORE;
}

bool ctl_inject_at_end(const struct ctl_inject *s) {
        return !s->done && s->scanned < CTL_INJECT_MAX && s->state != S_RAW;
}
