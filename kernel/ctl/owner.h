/* owner.h — the owner's username and password for password sign-in
 * (SEED_OWNER_USER, default "owner", and SEED_OWNER_PASSWORD, at least 12
 * characters). Only a keyed hash of each is kept: HMAC-SHA-256 under a key
 * drawn at random when the kernel starts, so neither the plain text nor a
 * hash that outlives this process is in memory. Checks run in constant time
 * and always hash both fields. Nothing here logs. */
#pragma once

#include "base/base.h"
#include "base/crypto.h"

#define CTL_OWNER_DEFAULT_USER "owner"
#define CTL_PASSWORD_MIN_CHARS 12
#define CTL_PASSWORD_MAX_BYTES 1024
#define CTL_USER_MAX_BYTES 128

struct ctl_owner {
        bool enabled;
        uint8_t key[32];
        char user_mac[SHA256_HEX_LEN + 1];
        char password_mac[SHA256_HEX_LEN + 1];
};

/* Sets o up from the borrowed user (NULL or empty: "owner") and password; the
 * caller wipes its own copy of the password afterwards. Without a password
 * (NULL or empty) -ENOENT; a password shorter than CTL_PASSWORD_MIN_CHARS
 * characters -EINVAL (longer than CTL_PASSWORD_MAX_BYTES -E2BIG); a user with
 * control characters or longer than CTL_USER_MAX_BYTES -EBADMSG. On any error
 * o is left disabled. */
int ctl_owner_init(struct ctl_owner *o, const char *user, const char *password);
/* Whether user and password are the owner's. False when disabled. */
bool ctl_owner_check(const struct ctl_owner *o, const char *user, const char *password);
/* Wipes o (it is then disabled). */
void ctl_owner_clear(struct ctl_owner *o);

/* Characters (UTF-8 code points; a stray byte counts as one) in s. */
size_t ctl_utf8_chars(const char *s);
