/* httpc.h — outbound HTTP requests (the only libcurl user): the CLI talking
 * to its kernel, and the model providers.
 *
 * Redirects are never followed (a request's headers, e.g. an API key, go to
 * the URL given and nowhere else), only http and https are spoken, and
 * neither loopback addresses nor plain http are sent through a proxy (the
 * environment's https_proxy is honoured for https, which it only tunnels). */
#pragma once

#include "base/base.h"

/* Returns true to abort the transfer (polled about once a second, and on
 * every chunk of data). */
typedef bool (*httpc_abort_fn)(void *userdata);

struct httpc_request {
        const char *method;        /* "GET", "POST", … */
        const char *url;
        char *const *headers;      /* "Name: value" lines, NULL-terminated, may be NULL */
        const char *body;          /* may be NULL */
        size_t body_len;
        int timeout_ms;            /* whole request; 0 = 30 s */
        size_t max_response;       /* body cap; 0 = 8 MiB */
        httpc_abort_fn abort_fn;   /* may be NULL */
        void *abort_userdata;
};

struct httpc_response {
        long status;               /* HTTP status */
        char *body;                /* NUL-terminated; caller frees with httpc_response_done */
        size_t body_len;
        char **headers;            /* the final response's "Name: value" lines (CRLF
                                    * stripped), NULL-terminated, never NULL on success;
                                    * at most 100 lines of at most 8 KiB are kept */
};

/* 0 when a response arrived (any status); -errno for transport errors, with
 * *ret_error (may be NULL; caller frees) saying what happened. The error
 * text never contains request headers. Errors:
 *   -ETIMEDOUT     the timeout passed
 *   -ECONNREFUSED  could not connect
 *   -EHOSTUNREACH  could not resolve the host
 *   -ECONNRESET    the connection broke (send/receive failed, empty reply)
 *   -EPROTO        TLS failure (handshake, certificate)
 *   -E2BIG         the response body was larger than max_response
 *   -ECANCELED     abort_fn asked to stop
 *   -EINVAL        bad URL or unsupported protocol
 *   -EIO           anything else */
int httpc_do(const struct httpc_request *req, struct httpc_response *ret, char **ret_error);
void httpc_response_done(struct httpc_response *r);

/* Whether a httpc_do() error is a network failure worth retrying (timeout,
 * refused, unresolved, reset, other I/O). TLS failures, oversized
 * responses, cancellation and bad URLs are not. */
bool httpc_error_is_network(int r);

/* The value of the first response header called name (case-insensitive),
 * leading/trailing blanks trimmed, or NULL. Borrowed from r. */
const char *httpc_response_header(const struct httpc_response *r, const char *name);
