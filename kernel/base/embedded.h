/* embedded.h — files compiled into the binary by tools/embed.py (the control
 * plane's static files, the kernel's migrations). */
#pragma once

#include <stddef.h>

struct embedded_file {
        const char *path;          /* relative to the embedded folder; NULL ends the list */
        const unsigned char *data; /* NUL-terminated for convenience */
        size_t len;
};

/* Finds path in a list; NULL if absent. */
const struct embedded_file *embedded_find(const struct embedded_file *list, const char *path);
