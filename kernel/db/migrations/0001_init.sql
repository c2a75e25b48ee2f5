-- Kernel memory: one-time sign-in links and owner sessions.
-- Only hashes of links and cookies are stored; times are ms since the epoch.

CREATE TABLE signin_links (
    hash        text PRIMARY KEY,
    created_at  bigint NOT NULL,
    expires_at  bigint NOT NULL,
    used_at     bigint
);
CREATE INDEX signin_links_live ON signin_links (expires_at) WHERE used_at IS NULL;

CREATE TABLE owner_sessions (
    id            text PRIMARY KEY,
    hash          text NOT NULL UNIQUE,
    user_agent    text NOT NULL DEFAULT '',
    created_at    bigint NOT NULL,
    last_used_at  bigint NOT NULL,
    expires_at    bigint NOT NULL,
    revoked_at    bigint
);
CREATE INDEX owner_sessions_created_at ON owner_sessions (created_at);
