/* fuzz-checks.c — declared checks (kernel/checks: what the model declares in
 * submit_plan or finish) on arbitrary bytes as JSON text. Besides memory
 * errors it checks the promises of checks.h for whatever is accepted: at
 * most CHECKS_MAX checks, each with a known method, a path that starts with
 * '/', is at most CHECKS_PATH_MAX bytes of URL characters (nothing that
 * could split a request line), a status of 100..599, a bounded body
 * substring, a bounded request body only for POST, PUT and PATCH, and a
 * name that is exactly "http:<METHOD> <path>". */
#include "checks/checks.h"

#include <stdint.h>

static void check_one(const struct decl_check *c) {
        static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
        bool known = false, bodied = false;
        for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
                if (streq(c->method, methods[i])) {
                        known = true;
                        bodied = i >= 2 && i <= 4;
                }
        size_t n = strlen(c->path);
        if (!known || c->path[0] != '/' || n > CHECKS_PATH_MAX || c->status < 100 || c->status > 599)
                abort();
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)c->path[i] <= ' ' || (unsigned char)c->path[i] >= 0x7f || c->path[i] == '#' ||
                    c->path[i] == '\\' || c->path[i] == '"' || c->path[i] == '<' || c->path[i] == '>')
                        abort();
        if (c->contains && (strlen(c->contains) < 1 || strlen(c->contains) > CHECKS_CONTAINS_MAX))
                abort();
        if (c->send && (!bodied || strlen(c->send) > CHECKS_SEND_MAX))
                abort();
        if (strncmp(c->name, "http:", 5) || strncmp(c->name + 5, c->method, strlen(c->method)) ||
            c->name[5 + strlen(c->method)] != ' ' || !streq(c->name + 6 + strlen(c->method), c->path))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        struct decl_check *c = NULL;
        size_t n = 0;
        char *err = NULL;
        int r = checks_parse_text(text, &c, &n, &err);
        free(text);
        if (r == -ENOMEM)
                return 0;
        if (r < 0) {
                if (r != -EINVAL || !err)
                        abort();
                free(err);
                return 0;
        }
        if (n > CHECKS_MAX || (n && !c))
                abort();
        for (size_t i = 0; i < n; i++)
                check_one(&c[i]);
        checks_free(c, n);
        return 0;
}
