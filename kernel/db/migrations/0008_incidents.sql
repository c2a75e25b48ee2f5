-- Kernel memory: the doctor's incidents (kernel/health). One row per
-- incident: its cause ("5xx GET /items/:id", "crash", "gave_up",
-- "job <name>"), kind, status (kernel/health/status.c's edges), times in ms
-- since the epoch, how often the cause happened while it was open, the
-- evidence (bounded text the kernel collected: log lines, the answers), the
-- diagnosis, the fix's evolution and, while watching, until when.
-- One incident per cause while it has not ended: a unique index.

CREATE TABLE incidents (
    id             text PRIMARY KEY CHECK (id ~ '^inc_[0-9a-f]{16}$'),
    cause          text NOT NULL CHECK (length(cause) BETWEEN 1 AND 256),
    kind           text NOT NULL CHECK (kind IN ('5xx', 'crash', 'gave_up', 'job')),
    status         text NOT NULL DEFAULT 'open' CHECK (status IN
                       ('open', 'diagnosing', 'diagnosed', 'fixing', 'watching', 'resolved', 'ignored')),
    opened_at      bigint NOT NULL,
    updated_at     bigint NOT NULL,
    last_seen_at   bigint NOT NULL,
    occurrences    integer NOT NULL DEFAULT 1,
    evidence       text NOT NULL DEFAULT '' CHECK (length(evidence) <= 16384),
    diagnosis      text CHECK (length(diagnosis) <= 16384),
    note           text,
    fix_evolution  text,
    watch_until    bigint
);
CREATE UNIQUE INDEX incidents_one_open_per_cause ON incidents (cause)
    WHERE status NOT IN ('resolved', 'ignored');
CREATE INDEX incidents_by_opened ON incidents (opened_at DESC);

-- Each diagnosis started (the daily cap counts these).
CREATE TABLE incident_diagnoses (
    id           bigserial PRIMARY KEY,
    incident_id  text NOT NULL REFERENCES incidents (id) ON DELETE CASCADE,
    started_at   bigint NOT NULL,
    ended_at     bigint,
    outcome      text
);
CREATE INDEX incident_diagnoses_by_start ON incident_diagnoses (started_at);
