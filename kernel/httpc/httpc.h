/* httpc.h — outbound HTTP requests (the only libcurl user, so the one HTTP
 * client and response parser): the CLI talking to its kernel, the model
 * providers, the organism's health probe and the http_request tool talking to
 * an evolution's preview app, both over the app's bridge socket.
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

/* Checks a connection (e.g. who listens on a Unix socket) before anything is
 * sent over it: 0 to go on, -errno (httpc_do() returns it) to refuse it. fd
 * is borrowed. */
typedef int (*httpc_check_fn)(void *userdata, int fd);

struct httpc_request {
        const char *method;        /* "GET", "POST", … */
        const char *url;
        char *const *headers;      /* "Name: value" lines, NULL-terminated, may be NULL;
                                    * a line with a control character (CR, LF, …) other
                                    * than tab is refused (-EINVAL), never sent */
        const char *body;          /* may be NULL */
        size_t body_len;
        int timeout_ms;            /* whole request; 0 = 30 s */
        int connect_timeout_ms;    /* connecting; 0 = curl's own (within timeout_ms) */
        size_t max_response;       /* body cap; 0 = 8 MiB */
        bool truncate;             /* a longer body is cut at the cap (ret->truncated,
                                    * the rest not read) instead of -E2BIG */
        httpc_abort_fn abort_fn;   /* may be NULL */
        void *abort_userdata;
        const char *unix_socket;   /* speak to this Unix socket instead of the URL's
                                    * host (the URL's host is then only the Host
                                    * header), or NULL. Borrowed. */
        httpc_check_fn check_fn;   /* may be NULL */
        void *check_userdata;
};

struct httpc_response {
        long status;               /* HTTP status */
        char *status_line;         /* the final response's status line, e.g.
                                    * "HTTP/1.1 200 OK" (CRLF stripped); "" if none */
        bool truncated;            /* with req->truncate: the body was cut at the cap */
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
 *   -EINVAL        bad URL, method or header line, unsupported protocol, or
 *                  an answer that is not HTTP/1.x
 *   check_fn's own error
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
