/* httpc.h — outbound HTTP requests (the only libcurl user): the CLI talking
 * to its kernel, and later the model providers. */
#pragma once

#include "base/base.h"

struct httpc_request {
        const char *method;        /* "GET", "POST", … */
        const char *url;
        char *const *headers;      /* "Name: value" lines, NULL-terminated, may be NULL */
        const char *body;          /* may be NULL */
        size_t body_len;
        int timeout_ms;            /* whole request; 0 = 30 s */
        size_t max_response;       /* body cap; 0 = 8 MiB */
};

struct httpc_response {
        long status;               /* HTTP status */
        char *body;                /* NUL-terminated; caller frees with httpc_response_done */
        size_t body_len;
};

/* 0 when a response arrived (any status); -errno for transport errors, with
 * *ret_error (may be NULL; caller frees) saying what happened. */
int httpc_do(const struct httpc_request *req, struct httpc_response *ret, char **ret_error);
void httpc_response_done(struct httpc_response *r);
