-- Kernel memory: the scheduler's jobs (kernel/schedule). One row per job
-- name: its last run (start and end, ms since the epoch), how it ended
-- (0, or a negative errno), its error, how many runs failed in a row and
-- how many ran. The next run is computed from the last start, so a run
-- missed while the kernel was down runs once when it is back.

CREATE TABLE schedule_jobs (
    name             text PRIMARY KEY,
    last_started_at  bigint NOT NULL,
    last_ended_at    bigint NOT NULL,
    last_result      integer NOT NULL DEFAULT 0,
    last_error       text,
    failures         integer NOT NULL DEFAULT 0,
    runs             bigint NOT NULL DEFAULT 0
);
