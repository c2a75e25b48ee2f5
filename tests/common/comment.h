/* comment.h — output from inside a sandbox (or any multi-line text) as TAP
 * comments, one "# <prefix><line>" per line. Header-only, for cmocka tests
 * (include after <cmocka.h>). */
#pragma once

#include <string.h>

static void print_comment(const char *prefix, const char *text) {
        for (const char *line = text ? text : "", *nl; *line; line = nl + 1) {
                nl = strchrnul(line, '\n');
                print_message("# %s%.*s\n", prefix, (int)(nl - line), line);
                if (!*nl)
                        break;
        }
}
