-- Kernel settings the owner changes in the control plane, e.g. the model
-- the Seed thinks with (kernel/mind). Never a secret: a key lent in the
-- control plane lives in the kernel's memory only. Times are ms since the epoch.

CREATE TABLE kernel_settings (
    key         text PRIMARY KEY,
    value       text NOT NULL,
    updated_at  bigint NOT NULL
);
