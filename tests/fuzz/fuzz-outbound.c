/* fuzz-outbound.c — the parsers of outbound access on arbitrary bytes.
 *
 * The first byte chooses:
 *   0..3  registries_parse: a package client's output (npm, pip,
 *         pip-default, go), which comes from outside the kernel
 *   4     registries_host_from_url on the bytes as one URL
 *   5     outbound_request_parse on the bytes as JSON (the API's and the
 *         tool's request)
 * Every host kept must be one the proxy accepts, lowercase, and the number
 * kept within REGISTRIES_MAX; an accepted request obeys its limits. */
#include "egress/egress.h"
#include "outbound/outbound.h"
#include "registries/registries.h"

#include <stdint.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

static void check_host(const char *h) {
        check(egress_pattern_check(h, NULL) == 0);
        for (const char *p = h; *p; p++)
                check(!(*p >= 'A' && *p <= 'Z'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const clients[] = {"npm", "pip", "pip-default", "go"};
        if (size < 1)
                return 0;
        unsigned mode = data[0] % 6;
        char *text = strndup((const char *)data + 1, size - 1);
        check(text);
        if (mode < 4) {
                struct registries r = {0};
                int k = registries_parse(&r, clients[mode], text);
                check(k >= 0 || k == -ENOMEM);
                check(r.n <= REGISTRIES_MAX);
                for (size_t i = 0; i < r.n; i++)
                        check_host(r.v[i].host);
                registries_done(&r);
        } else if (mode == 4) {
                char *host = NULL, *err = NULL;
                if (registries_host_from_url(text, &host, &err) == 0) {
                        check_host(host);
                        check(!err);
                } else
                        check(!host);
                free(host);
                free(err);
        } else {
                json_t *o = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES, NULL);
                struct outbound_request req = {0};
                char *err = NULL;
                if (o && outbound_request_parse(o, NULL, &req, &err) == 0) {
                        size_t n = strv_length(req.hosts);
                        check(n >= 1 && n <= OUTBOUND_HOSTS_MAX);
                        for (char **h = req.hosts; *h; h++)
                                check_host(*h);
                        check(strv_length(req.secrets) <= OUTBOUND_SECRETS_MAX);
                        for (char **s = req.secrets; *s; s++)
                                check(outbound_secret_name_check(*s, NULL, NULL) == 0);
                        check(req.scope == OUTBOUND_FOR_ORGANISM || !req.secrets[0]);
                        check(strlen(req.reason) <= OUTBOUND_REASON_MAX);
                        outbound_request_done(&req);
                }
                free(err);
                json_decref(o);
        }
        free(text);
        return 0;
}
