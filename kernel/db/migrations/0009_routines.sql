-- Routines and jobs (issue 18, kernel/routines).
-- A routine: a prompt the owner approved (create_routine in the chat), run
-- on its schedule with the chat's read-only tools. Its runs: the last 100
-- are kept (older ones are deleted as new ones are recorded).
CREATE TABLE routines (
    id           bigserial PRIMARY KEY,
    name         text NOT NULL UNIQUE,
    prompt       text NOT NULL,
    schedule     text NOT NULL,
    tz           text NOT NULL DEFAULT 'UTC',
    paused       boolean NOT NULL DEFAULT false,
    approval_id  text,
    created_at   bigint NOT NULL
);

-- A job: declared by the organism in organism/routines.yaml, synced on
-- every deploy (a job no longer declared is deleted with its runs).
-- synced_at: when it was declared as it is (its first run is after it).
CREATE TABLE routine_jobs (
    name       text PRIMARY KEY,
    method     text NOT NULL,
    path       text NOT NULL,
    schedule   text NOT NULL,
    tz         text NOT NULL DEFAULT 'UTC',
    paused     boolean NOT NULL DEFAULT false,
    synced_at  bigint NOT NULL
);

-- One run of a routine or a job. outcome: quiet | reported | failed |
-- skipped (the spend budget is reached). text: the report (routines) or
-- the status line (jobs); error: why it failed. Times in ms since the epoch.
CREATE TABLE routine_runs (
    id          bigserial PRIMARY KEY,
    routine_id  bigint REFERENCES routines (id) ON DELETE CASCADE,
    job_name    text REFERENCES routine_jobs (name) ON DELETE CASCADE,
    started_at  bigint NOT NULL,
    ended_at    bigint NOT NULL,
    outcome     text NOT NULL CHECK (outcome IN ('quiet', 'reported', 'ok', 'failed', 'skipped')),
    text        text,
    error       text,
    CHECK ((routine_id IS NULL) <> (job_name IS NULL))
);
CREATE INDEX routine_runs_by_routine ON routine_runs (routine_id, id) WHERE routine_id IS NOT NULL;
CREATE INDEX routine_runs_by_job ON routine_runs (job_name, id) WHERE job_name IS NOT NULL;
