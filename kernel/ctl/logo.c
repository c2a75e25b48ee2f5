/* logo.c — reading the Seed's logo. See logo.h. */
#include "ctl/logo.h"
#include "fsx/fsx.h"

#include <fcntl.h>

const char *const ctl_logo_paths[CTL_LOGO_CANDIDATES] = {"knowledge/logo.svg", "knowledge/logo.png"};
static const char *const logo_types[CTL_LOGO_CANDIDATES] = {"image/svg+xml", "image/png"};

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

void ctl_logo_done(struct ctl_logo *l) {
        if (!l)
                return;
        free(l->data);
        *l = (struct ctl_logo){0};
}

int ctl_logo_read(int root, size_t i, struct ctl_logo *ret) {
        _cleanup_free_ char *data = NULL, *error = NULL;
        size_t len = 0;
        if (root < 0 || i >= CTL_LOGO_CANDIDATES)
                return -EINVAL;
        int r = fsx_read(root, ctl_logo_paths[i], CTL_LOGO_MAX, &data, &len, &error);
        if (r == -ENOTDIR)
                return -ENOENT; /* knowledge is a file: there is no logo in it */
        if (r < 0)
                return r;
        bool png = streq(logo_types[i], "image/png");
        if (png && (len < sizeof png_signature || memcmp(data, png_signature, sizeof png_signature) != 0))
                return -EBADMSG;
        char hex[SHA256_HEX_LEN + 1];
        crypto_sha256_hex(data, len, hex);
        *ret = (struct ctl_logo){.data = TAKE_PTR(data), .len = len, .ctype = logo_types[i]};
        snprintf(ret->etag, sizeof ret->etag, "\"%s\"", hex);
        return 0;
}

const char *ctl_logo_refusal(int error) {
        switch (error) {
        case -ELOOP:
                return "is a symlink or leads outside the Seed folder";
        case -EFBIG:
                return "is larger than 256 KiB";
        case -EBADMSG:
                return "is not a PNG (it does not start with the PNG signature)";
        case -EMLINK:
                return "has several hard links";
        case -EINVAL:
        case -EISDIR:
                return "is not a regular file";
        default:
                return "cannot be read";
        }
}
