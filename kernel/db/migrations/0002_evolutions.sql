-- Kernel memory for evolutions: the requests, every step as an event, the
-- owner's approvals, the chat, and what each model call cost.
-- Times are ms since the epoch.

CREATE TABLE evolutions (
    id               text PRIMARY KEY,              -- evo_<hex>
    seq              bigserial UNIQUE,              -- FIFO order
    intent           text NOT NULL,
    kind             text NOT NULL DEFAULT 'evolve', -- evolve | rollback
    state            text NOT NULL,
    resume_state     text,                          -- the state needs_input interrupted
    title            text,
    scope            text,
    plan             jsonb,
    base_commit      text,
    commit_oid       text,
    from_generation  integer,
    to_generation    integer,
    repair_attempts  integer NOT NULL DEFAULT 0,
    questions_asked  integer NOT NULL DEFAULT 0,
    error            text,
    created_at       bigint NOT NULL,
    updated_at       bigint NOT NULL,
    finished_at      bigint
);
CREATE INDEX evolutions_state ON evolutions (state);

CREATE TABLE evolution_events (
    id            bigserial PRIMARY KEY,
    evolution_id  text NOT NULL REFERENCES evolutions (id) ON DELETE CASCADE,
    at            bigint NOT NULL,
    kind          text NOT NULL,   -- phase plan tool_call tool_result check note error approval agent_text question
    data          jsonb NOT NULL
);
CREATE INDEX evolution_events_by_evolution ON evolution_events (evolution_id, id);

CREATE TABLE approvals (
    id            text PRIMARY KEY,              -- apr_<hex>
    evolution_id  text REFERENCES evolutions (id) ON DELETE CASCADE,
    kind          text NOT NULL,                 -- tool | plan | apply | question
    tool          text,
    level         text,
    request       jsonb NOT NULL,                -- shown to the owner in full
    state         text NOT NULL DEFAULT 'pending', -- pending | approved | denied | answered | expired
    answer        text,
    created_at    bigint NOT NULL,
    decided_at    bigint
);
CREATE INDEX approvals_pending ON approvals (created_at) WHERE state = 'pending';

CREATE TABLE messages (
    id            bigserial PRIMARY KEY,
    role          text NOT NULL,                 -- owner | seed
    text          text NOT NULL,
    evolution_id  text REFERENCES evolutions (id) ON DELETE SET NULL,
    at            bigint NOT NULL
);

CREATE TABLE model_usage (
    id             bigserial PRIMARY KEY,
    at             bigint NOT NULL,
    purpose        text NOT NULL,                -- chat | evolution | reflection …
    reference      text,
    model          text NOT NULL,
    input_tokens   bigint NOT NULL,
    output_tokens  bigint NOT NULL,
    cost_usd       double precision NOT NULL DEFAULT 0
);
CREATE INDEX model_usage_by_reference ON model_usage (reference);
