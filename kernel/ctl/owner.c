/* owner.c — see owner.h. */
#include "ctl/owner.h"

size_t ctl_utf8_chars(const char *s) {
        size_t n = 0;
        for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
                n += (*p & 0xc0) != 0x80; /* continuation bytes belong to the character before */
        return n;
}

static void mac(const struct ctl_owner *o, const char *label, const char *s, char out[SHA256_HEX_LEN + 1]) {
        /* The label keeps the two fields apart: "user" and "password" hash
         * differently even for the same text. */
        char in[16 + CTL_PASSWORD_MAX_BYTES + 1];
        size_t ll = strlen(label), n = strnlen(s, CTL_PASSWORD_MAX_BYTES + 1);
        memcpy(in, label, ll);
        memcpy(in + ll, s, n);
        crypto_hmac_sha256_hex(o->key, sizeof o->key, in, ll + n, out);
        secure_zero(in, sizeof in);
}

void ctl_owner_clear(struct ctl_owner *o) {
        if (o)
                secure_zero(o, sizeof *o);
}

int ctl_owner_init(struct ctl_owner *o, const char *user, const char *password) {
        ctl_owner_clear(o);
        if (strempty(user))
                user = CTL_OWNER_DEFAULT_USER;
        if (strempty(password))
                return -ENOENT;
        if (strlen(password) > CTL_PASSWORD_MAX_BYTES)
                return -E2BIG;
        if (ctl_utf8_chars(password) < CTL_PASSWORD_MIN_CHARS)
                return -EINVAL;
        if (strlen(user) > CTL_USER_MAX_BYTES)
                return -EBADMSG;
        for (const unsigned char *p = (const unsigned char *)user; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return -EBADMSG;
        int r = crypto_random(o->key, sizeof o->key);
        if (r < 0) {
                ctl_owner_clear(o);
                return r;
        }
        mac(o, "user:", user, o->user_mac);
        mac(o, "password:", password, o->password_mac);
        o->enabled = true;
        return 0;
}

bool ctl_owner_check(const struct ctl_owner *o, const char *user, const char *password) {
        char u[SHA256_HEX_LEN + 1], p[SHA256_HEX_LEN + 1];
        if (!o || !o->enabled || !user || !password)
                return false;
        /* Both are hashed and compared whatever the first one gave, so the
         * time taken says nothing about which one was wrong. */
        mac(o, "user:", user, u);
        mac(o, "password:", password, p);
        bool ok_user = crypto_streq_ct(u, o->user_mac);
        bool ok_password = crypto_streq_ct(p, o->password_mac);
        secure_zero(p, sizeof p);
        return ok_user & ok_password;
}
