/* checks.h — declared checks (issue 19 "Reach"): HTTP requests the model
 * declares in its plan (submit_plan "checks") or when it ends the change
 * (finish "checks"), which the kernel itself sends to the launched candidate
 * during verification (kernel/evolution/verify.c). One check is
 *
 *   {"request": "http:<METHOD> <path>", "status": <expected status>,
 *    "body_contains": "<substring of the answer's body>" (optional),
 *    "send": "<request body>" (optional; POST, PUT, PATCH only)}
 *
 * This module owns their form: parsing and validating what the model sent
 * (bounded: count, methods, path characters and length, substring and body
 * lengths), with an error naming the check and what is wrong. It sends
 * nothing itself. */
#pragma once

#include "base/base.h"

struct json_t;

#define CHECKS_MAX 12            /* per declaration (the plan's, finish's) */
#define CHECKS_PATH_MAX 200      /* bytes of a path, query included */
#define CHECKS_CONTAINS_MAX 200  /* bytes of a body substring */
#define CHECKS_SEND_MAX 4096     /* bytes of a request body */

struct decl_check {
        char *name;            /* "http:POST /items", as declared: owned */
        char method[8];        /* GET HEAD POST PUT PATCH DELETE */
        char *path;            /* "/…": owned */
        int status;            /* 100..599 */
        char *contains;        /* may be NULL; owned */
        char *send;            /* may be NULL; owned */
};

/* Whether the method changes something (not GET or HEAD). */
bool checks_is_write(const struct decl_check *c);

/* Parses a JSON array of declared checks (NULL or absent: none). 0 with
 * *ret (caller frees with checks_free) and *ret_n; -EINVAL with *ret_error
 * (caller frees) naming the bad check and why; -ENOMEM. */
int checks_parse(struct json_t *arr, struct decl_check **ret, size_t *ret_n, char **ret_error);
/* The same from JSON text (e.g. a stored plan's "checks"). */
int checks_parse_text(const char *json, struct decl_check **ret, size_t *ret_n, char **ret_error);
void checks_free(struct decl_check *c, size_t n);

/* The JSON schema of a "checks" argument, for the tool tables. */
#define CHECKS_SCHEMA                                                                                          \
        "{\"type\":\"array\",\"maxItems\":12,\"description\":\"HTTP checks the kernel sends to the launched "  \
        "app during verification; a failing one comes back to you for repair\",\"items\":{\"type\":\"object\"," \
        "\"properties\":{"                                                                                     \
        "\"request\":{\"type\":\"string\",\"minLength\":8,\"maxLength\":220,\"description\":\"http:<METHOD> "  \
        "<path>, METHOD one of GET HEAD POST PUT PATCH DELETE, e.g. 'http:POST /api/items'\"},"               \
        "\"status\":{\"type\":\"integer\",\"minimum\":100,\"maximum\":599,\"description\":\"the expected "     \
        "status\"},"                                                                                           \
        "\"body_contains\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":200,\"description\":\"a text "   \
        "the answer's body must contain\"},"                                                                   \
        "\"send\":{\"type\":\"string\",\"maxLength\":4096,\"description\":\"the request body (JSON) for "      \
        "POST, PUT and PATCH\"}},"                                                                             \
        "\"required\":[\"request\",\"status\"],\"additionalProperties\":false}}"
