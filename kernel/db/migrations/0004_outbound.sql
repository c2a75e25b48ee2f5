-- Kernel memory: the owner's outbound grants (kernel/outbound). A grant is
-- exactly what the owner approved: host patterns, what they are for, the
-- names of the secrets given to the live organism (never a value), why, and
-- who granted it (the owner in Settings, or the approval id of a
-- request_outbound_access call). Revoking keeps the row for history.
-- Times are ms since the epoch.

CREATE TABLE outbound_grants (
    id          text PRIMARY KEY,                       -- grt_<hex>
    hosts       jsonb NOT NULL,                         -- ["api.example.com", "*.example.org"]
    scope       text NOT NULL CHECK (scope IN ('organism', 'evolutions')),
    secrets     jsonb NOT NULL DEFAULT '[]',            -- ["WEATHER_API_KEY"]: names only
    reason      text NOT NULL DEFAULT '',
    granted_by  text NOT NULL,                          -- 'owner' or apr_<hex>
    granted_at  bigint NOT NULL,
    revoked_at  bigint
);
CREATE INDEX outbound_grants_active ON outbound_grants (granted_at) WHERE revoked_at IS NULL;
