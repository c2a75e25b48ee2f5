/* registries.h — the package registries that evolution, build, test and
 * install commands may reach through the egress proxy (SPEC §5): the hosts
 * the machine's own package clients are configured to use, asked of those
 * clients at kernel start, plus seed.yaml's egress.registries. No host name
 * is written in this code: a machine set up for a mirror gets that mirror,
 * with no configuration of the Seed's.
 *
 * The clients are a table of data (registries.c clients[]): npm's configured
 * registry (`npm config get registry`), pip's configured indexes
 * (`python3 -m pip config list`, which includes PIP_INDEX_URL and
 * PIP_EXTRA_INDEX_URL) or, when none is configured, pip's own default index
 * and file host (asked of pip itself), and Go's GOPROXY and GOSUMDB
 * (`go env`; "direct" and "off" skipped). Each runs as the kernel's account,
 * with the kernel's environment, within REGISTRIES_CLIENT_TIMEOUT_MS and
 * REGISTRIES_CLIENT_OUTPUT_MAX bytes of output; a missing client is skipped
 * and said so. Every URL is parsed strictly (registries_host_from_url): https
 * only, port 443, no credentials; an IP literal or an internal name is
 * refused and logged.
 *
 * The result says where each host came from, for Settings and `seed
 * doctor`. Not thread-safe: one struct registries per caller. */
#pragma once

#include "base/base.h"
#include <stdio.h>

#define REGISTRIES_MAX 64                     /* hosts kept (the rest are dropped, said so) */
#define REGISTRIES_CLIENT_TIMEOUT_MS 15000    /* one client's run */
#define REGISTRIES_CLIENT_OUTPUT_MAX (64 * 1024)
#define REGISTRIES_URL_MAX 2048

struct registry {
        char *host; /* lowercased, no trailing dot: a pattern egress_pattern_check() accepts */
        char *from; /* where it came from: "npm config get registry", "seed.yaml egress.registries", … */
};

struct registries {
        struct registry *v; /* in the order found, each host once (the first source kept) */
        size_t n;
        char **notes;       /* what was skipped and why, NULL-terminated (may be NULL) */
};

void registries_done(struct registries *r);

/* The host of a registry URL: "https://" (any case), then a host name, an
 * optional ":443", and a path, query or fragment or nothing. Refused
 * (-EINVAL, *ret_error says why; caller frees; may be NULL): another scheme,
 * credentials, another port, an IP literal, an internal name, a malformed
 * or over-long (REGISTRIES_URL_MAX) URL. *ret_host: lowercased, one trailing
 * dot dropped; caller frees. Never echoes credentials. */
int registries_host_from_url(const char *url, char **ret_host, char **ret_error);

/* Adds host (a pattern egress accepts, lowercased) from a source: 1 added,
 * 0 when it was there already (kept with its first source). -EINVAL with a
 * note (and a log line) for a bad host; -E2BIG past REGISTRIES_MAX. */
int registries_add(struct registries *r, const char *host, const char *from);
/* Adds a note ("npm: not installed, skipped"). */
int registries_note(struct registries *r, const char *fmt, ...) _printf_(2, 3);

/* Reads one client's output into r: client is a row name of the table
 * ("npm", "pip", "pip-default", "go"). Bad URLs become notes (and a log
 * line), never errors. Returns how many hosts the output gave (>= 0), or
 * -ENOMEM / -EINVAL for an unknown client. Pure: for tests and fuzzing. */
int registries_parse(struct registries *r, const char *client, const char *output);

/* Asks every client of the table (see the top of this file), then adds
 * configured (seed.yaml's egress.registries; may be NULL) with the source
 * "seed.yaml egress.registries". Blocks (each client at most
 * REGISTRIES_CLIENT_TIMEOUT_MS). 0 with *ret filled (caller calls
 * registries_done()), or -ENOMEM. */
int registries_discover(char *const *configured, struct registries *ret);

/* The hosts alone, NULL-terminated (for egress_set_registries). Caller frees
 * with strv_free(). */
int registries_hosts(const struct registries *r, char ***ret);

/* For `seed doctor`: one line per host ("  registry.npmjs.org  (npm config
 * get registry)"), then the notes, under a heading. */
int registries_print(const struct registries *r, FILE *f);
