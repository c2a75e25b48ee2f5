/* logo.h — the Seed's logo (GET /_seed/logo): knowledge/logo.svg, else
 * knowledge/logo.png, from the Seed folder's committed content.
 *
 * The logo is content the Seed generated, in a directory that sandboxed code
 * can write, so it is read only through fsx (openat2 with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS beneath the Seed folder): a link such as
 * knowledge/logo.svg → /etc/passwd, or a linked knowledge/, fails instead of
 * serving a host file. At most CTL_LOGO_MAX bytes; a PNG must start with the
 * PNG signature. It is served with CTL_LOGO_CSP (a sandbox: an SVG opened
 * directly cannot run script) and rendered by the UI with <img>, which runs
 * none either. Nothing here logs. */
#pragma once

#include "base/base.h"
#include "base/crypto.h"

#define CTL_LOGO_MAX (256 * 1024)
/* "sandbox" as seed 001 asks; no network either, so an SVG opened on its
 * own cannot fetch anything (inline styles and data: images still work). */
#define CTL_LOGO_CSP "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:"

/* The candidates, in order: the first that exists is the logo. */
#define CTL_LOGO_CANDIDATES 2
extern const char *const ctl_logo_paths[CTL_LOGO_CANDIDATES];

struct ctl_logo {
        char *data;                        /* owned */
        size_t len;
        const char *ctype;                 /* static: "image/svg+xml" or "image/png" */
        char etag[SHA256_HEX_LEN + 3];     /* "\"<sha-256 hex>\"" */
};
void ctl_logo_done(struct ctl_logo *l);

/* Reads candidate i (< CTL_LOGO_CANDIDATES) beneath root (the Seed folder,
 * e.g. from fsx_open_root()). -ENOENT when it does not exist (nor does its
 * directory). Otherwise it is the logo, and anything wrong with it refuses
 * it (the caller must not fall back to the next candidate): -ELOOP (a
 * symlink on the way, or an escape), -EFBIG (over CTL_LOGO_MAX), -EBADMSG
 * (a .png without the PNG signature), -EMLINK (several hard links), -EINVAL
 * or -EISDIR (not a regular file), or another -errno. */
int ctl_logo_read(int root, size_t i, struct ctl_logo *ret);

/* Why ctl_logo_read() refused a logo, for the log: "is a symlink …". */
const char *ctl_logo_refusal(int error);
