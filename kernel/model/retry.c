/* retry.c — which failures are retried, and how long to wait before the next
 * attempt. */
#include "model/model-internal.h"

#include <math.h>

bool model_status_retryable(long status) {
        return status == 408 || status == 409 || status == 429 || (status >= 500 && status <= 599);
}

bool model_error_code_retryable(const char *code) {
        static const char *const transient[] = {
                "rate_limit_exceeded", "rate_limit_error", "rate_limited", "overloaded",
                "overloaded_error",    "server_error",     "api_error",    "timeout",
                "internal_error",      "service_unavailable",
        };
        if (strempty(code))
                return false;
        char *end = NULL;
        errno = 0;
        long n = strtol(code, &end, 10);
        if (errno == 0 && end != code && *end == 0)
                return model_status_retryable(n);
        for (size_t i = 0; i < ARRAY_SIZE(transient); i++)
                if (streq(code, transient[i]))
                        return true;
        return false;
}

int64_t model_backoff_ms(int attempt, int base_ms, uint64_t rnd) {
        if (attempt < 1)
                attempt = 1;
        if (base_ms < 0)
                base_ms = 0;
        int64_t ceiling = base_ms;
        for (int i = 1; i < attempt && ceiling < MODEL_BACKOFF_CAP_MS; i++)
                ceiling *= 2;
        if (ceiling > MODEL_BACKOFF_CAP_MS)
                ceiling = MODEL_BACKOFF_CAP_MS;
        return (int64_t)(rnd % (uint64_t)(ceiling + 1));
}

int64_t model_retry_after_ms(const char *value, bool ms) {
        if (strempty(value))
                return -1;
        char *end = NULL;
        errno = 0;
        double v = strtod(value, &end);
        while (end && (*end == ' ' || *end == '\t'))
                end++;
        if (errno != 0 || end == value || *end != 0 || !isfinite(v) || v < 0)
                return -1;
        double total = ms ? v : v * 1000.0;
        return total > MODEL_RETRY_AFTER_CAP_MS ? MODEL_RETRY_AFTER_CAP_MS : (int64_t)total;
}
