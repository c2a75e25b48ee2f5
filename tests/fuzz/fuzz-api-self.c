/* fuzz-api-self.c — what the control plane reads from knowledge/ and skills/ on
 * arbitrary bytes: knowledge/self.yaml through config's one YAML reader
 * (cfg_scalars_parse), SKILL.md front matter (the fence, then that reader),
 * the accent check and the URL redaction. Besides memory errors it checks
 * that every value read is valid UTF-8 without NUL, within
 * API_SELF_VALUE_MAX, that every refusal names "file:line:col:", and that an
 * accent accepted is exactly #rgb or #rrggbb. */
#include "api/self.h"
#include "config/config.h"

#include <stdint.h>

static void check_value(const char *v) {
        if (!v)
                return;
        size_t n = strlen(v);
        if (n > API_SELF_VALUE_MAX)
                abort();
        /* NUL-free by construction of strlen; check UTF-8 by hand. */
        const unsigned char *p = (const unsigned char *)v;
        for (size_t i = 0; i < n;) {
                size_t k = p[i] < 0x80 ? 1
                           : (p[i] & 0xe0) == 0xc0 ? 2
                           : (p[i] & 0xf0) == 0xe0 ? 3
                           : (p[i] & 0xf8) == 0xf0 ? 4
                                                   : 0;
                if (k == 0 || i + k > n)
                        abort();
                for (size_t j = 1; j < k; j++)
                        if ((p[i + j] & 0xc0) != 0x80)
                                abort();
                i += k;
        }
}

static void check_accent(const char *v) {
        if (!api_self_accent_valid(v))
                return;
        size_t n = strlen(v);
        if (v[0] != '#' || (n != 4 && n != 7) || strspn(v + 1, "0123456789abcdefABCDEF") != n - 1)
                abort();
}

/* A refusal names where: "<file>:line:col: ...", both at least 1. */
static void check_error(int r, char *err, const char *file) {
        if (r == -EINVAL) {
                unsigned line = 0, col = 0;
                size_t n = strlen(file);
                if (!err || strncmp(err, file, n) != 0 || sscanf(err + n, ":%u:%u: ", &line, &col) != 2 ||
                    line < 1 || col < 1)
                        abort();
        } else if (r < 0 && r != -ENOMEM && r != -ENOENT) {
                abort();
        }
        free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const keys[] = {"slug", "name", "tagline", "accent", "purpose", NULL};
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        char *vals[5] = {0}, *err = NULL;
        int r = cfg_scalars_parse(text, size, "self.yaml", keys, vals, &err);
        check_error(r, err, "self.yaml");
        if (r == 0) {
                for (size_t i = 0; i < 5; i++) {
                        check_value(vals[i]);
                        free(vals[i]);
                        vals[i] = NULL;
                }
        }
        err = NULL;
        r = cfg_front_matter(text, size, "SKILL.md", keys, vals, &err);
        check_error(r, err, "SKILL.md");
        if (r == 0) {
                for (size_t i = 0; i < 5; i++) {
                        check_value(vals[i]);
                        if (i == 3)
                                check_accent(vals[i]);
                        free(vals[i]);
                }
        }
        check_accent(text);
        char *u = NULL;
        if (api_self_redact_url(text, &u) == 0) {
                /* The redacted URL is never longer and never keeps user info. */
                if (strlen(u) > strlen(text))
                        abort();
                const char *auth = strstr(u, "://");
                const char *at = auth ? strchr(auth + 3, '@') : NULL;
                if (at && strcspn(auth + 3, "/") > (size_t)(at - (auth + 3)))
                        abort();
                free(u);
        }
        free(text);
        return 0;
}
