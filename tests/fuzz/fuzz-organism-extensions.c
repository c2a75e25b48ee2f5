/* fuzz-organism-extensions.c — organism/control/extensions.json on arbitrary
 * bytes (organism_extensions_parse), and organism_screen_path_ok on them as a
 * path. Besides memory errors it checks the promises of extensions.h: at
 * most ORGANISM_EXT_SCREENS_MAX screens, each with a valid id (unique), a
 * bounded title without control characters and a path that stays on the
 * app's origin and out of /_seed; at most ORGANISM_EXT_ERRORS_MAX + 1
 * messages, each bounded and printable. */
#include "organism/extensions.h"

#include <stdint.h>

/* A "." or ".." segment in the path itself: before any '?' or '#' (what
 * follows is the query or the fragment, never a path segment). */
static bool has_dot_segment(const char *p) {
        size_t n = strcspn(p, "?#");
        for (size_t i = 0; i < n; i++) {
                if (p[i] != '/')
                        continue;
                size_t k = i + 1;
                while (k < n && p[k] != '/')
                        k++;
                size_t len = k - i - 1;
                if ((len == 1 && p[i + 1] == '.') || (len == 2 && p[i + 1] == '.' && p[i + 2] == '.'))
                        return true;
        }
        return false;
}

static void check_path(const char *p) {
        size_t n = strlen(p);
        if (n == 0 || n > ORGANISM_EXT_PATH_MAX || p[0] != '/' || p[1] == '/')
                abort();
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)p[i] <= 0x20 || (unsigned char)p[i] >= 0x7f || p[i] == '\\')
                        abort();
        if (strncmp(p, "/_seed", 6) == 0 && (p[6] == 0 || p[6] == '/' || p[6] == '?' || p[6] == '#'))
                abort();
        if (has_dot_segment(p))
                abort();
}

static void check_text(const char *s, size_t max) {
        size_t n = strlen(s);
        if (n == 0 || n > max)
                abort();
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct organism_extensions *x = NULL;
        int r = organism_extensions_parse((const char *)data, size, &x);
        if (r == -ENOMEM)
                return 0;
        if (r < 0 || !x || !x->errors || x->n_screens > ORGANISM_EXT_SCREENS_MAX)
                abort();
        for (size_t i = 0; i < x->n_screens; i++) {
                const struct organism_screen *s = &x->screens[i];
                if (!organism_screen_id_ok(s->id) || !organism_screen_path_ok(s->path, NULL))
                        abort();
                for (size_t j = 0; j < i; j++)
                        if (streq(x->screens[j].id, s->id))
                                abort();
                check_text(s->title, ORGANISM_EXT_TITLE_MAX);
                check_path(s->path);
        }
        if (strv_length(x->errors) > ORGANISM_EXT_ERRORS_MAX + 1)
                abort();
        for (char **e = x->errors; *e; e++)
                check_text(*e, ORGANISM_EXT_ERROR_MAX);
        organism_extensions_free(x);

        char *p = malloc(size + 1);
        if (!p)
                return 0;
        memcpy(p, data, size);
        p[size] = 0;
        const char *why = NULL;
        if (organism_screen_path_ok(p, &why))
                check_path(p);
        else if (!why)
                abort();
        free(p);
        return 0;
}
