/* fuzz-health-route.c — the doctor's route normalisation and 5xx detector
 * (kernel/health/detect.c) on request paths and methods as any client sends
 * them. The first byte splits method from path. Every normalised route must
 * start with '/', stay within HEALTH_ROUTE_MAX (+ "/…"), hold only printable
 * ASCII (and the "…" mark), and normalising it again must change nothing;
 * a cause always fits HEALTH_CAUSE_MAX. */
#include "health/health.h"

#include <stdint.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

static struct health_detect *detector;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > 8192)
                return 0;
        size_t split = data[0] % 17;
        if (split > size - 1)
                split = size - 1;
        char *method = strndup((const char *)data + 1, split);
        char *path = strndup((const char *)data + 1 + split, size - 1 - split);
        check(method && path);

        char out[HEALTH_ROUTE_MAX + 1], again[HEALTH_ROUTE_MAX + 1];
        health_route_normalise(path, out, sizeof out);
        size_t n = strlen(out);
        check(out[0] == '/');
        check(n <= HEALTH_ROUTE_MAX);
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)out[i];
                check((c > 0x20 && c < 0x7f) || c >= 0x80); /* "…" is the only non-ASCII */
        }
        if (!strstr(out, "…")) {
                health_route_normalise(out, again, sizeof again);
                check(strcmp(out, again) == 0);
        }

        if (!detector)
                check(health_detect_new(&detector) == 0);
        char cause[HEALTH_CAUSE_MAX + 1];
        enum health_verdict v = health_detect_5xx(detector, method, path, (int64_t)size * 1000, cause);
        check(v == HEALTH_NOTHING || v == HEALTH_OPEN || v == HEALTH_AGAIN);
        check(strlen(cause) <= HEALTH_CAUSE_MAX && strncmp(cause, "5xx ", 4) == 0);
        if (v == HEALTH_OPEN)
                health_detect_closed(detector, cause);
        free(method);
        free(path);
        return 0;
}
