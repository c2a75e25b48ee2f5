/* fuzz-config.c — cfg_parse on arbitrary bytes. Besides memory errors it
 * checks that a parsed config obeys its own schema and that every error names
 * "file:line:col:" (or is out of memory). */
#include "config/config.h"

#include <stdint.h>

/* A parsed list entry is a host name or relative path: no controls, no spaces. */
static bool has_bad_byte(const char *s) {
        for (; *s; s++)
                if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
                        return true;
        return false;
}

static void check_strv(char **v) {
        if (!v)
                abort();
        for (; *v; v++)
                if (has_bad_byte(*v))
                        abort();
}

static void check_config(const struct cfg *c) {
        if (!c->name || !c->name[0] || strlen(c->name) > 41)
                abort();
        char *host = NULL;
        int port = 0;
        if (cfg_split_addr(c->server.addr, &host, &port) < 0 || port < 1 || port > 65535)
                abort();
        free(host);
        check_strv(c->server.allowed_hosts);
        check_strv(c->kernel.evolvable);
        for (char **e = c->kernel.evolvable; *e; e++)
                if ((*e)[0] == '/' || !endswith(*e, "/") || strstr(*e, ".."))
                        abort();
        bool compat = streq(c->model.provider, "openai-compatible");
        if (compat == !c->model.base_url[0])
                abort();
        if (!streq(c->sandbox.driver, "bwrap"))
                abort();
        if (c->organism.port < 1 || c->organism.port > 65535 || c->model.max_tokens < 1 ||
            c->model.max_tokens > 1000000 || c->organism.health[0] != '/')
                abort();
        if (c->permissions.safe > CFG_DENY || c->permissions.review > CFG_DENY ||
            c->permissions.dangerous > CFG_DENY)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct cfg *c = NULL;
        char *err = NULL;
        int r = cfg_parse((const char *)data, size, "fuzz.yaml", &c, &err);
        if (r >= 0) {
                if (!c || err)
                        abort();
                check_config(c);
                cfg_free(c);
                return 0;
        }
        if (c)
                abort();
        if (r == -EINVAL) {
                unsigned line = 0, col = 0;
                if (!err || sscanf(err, "fuzz.yaml:%u:%u: ", &line, &col) != 2 || line < 1 || col < 1)
                        abort();
        } else if (r != -ENOMEM) {
                abort();
        }
        free(err);
        return 0;
}
