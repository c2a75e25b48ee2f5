-- Kernel memory: how far an evolution reaches (issue 19, "Reach").
-- A roadmap is a goal too large for one change, split into 2..6 stages by the
-- plan of the evolution that declared it (its id is that evolution's); done
-- counts the stages whose evolution went live. knowledge/roadmap.md is its
-- rendering, written by the kernel only. An evolution may be one stage of a
-- roadmap (roadmap_id, roadmap_stage: 0-based), and keeps the owner's own
-- words when the chat started it from a message (owner_words; the intent is
-- then the chat agent's).

CREATE TABLE roadmaps (
    id          text PRIMARY KEY,
    goal        text NOT NULL CHECK (length(goal) BETWEEN 1 AND 1000),
    stages      jsonb NOT NULL CHECK (jsonb_typeof(stages) = 'array'
                                      AND jsonb_array_length(stages) BETWEEN 2 AND 6),
    done        integer NOT NULL DEFAULT 0 CHECK (done >= 0 AND done <= jsonb_array_length(stages)),
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL
);

ALTER TABLE evolutions
    ADD COLUMN owner_words   text CHECK (length(owner_words) <= 16384),
    ADD COLUMN roadmap_id    text REFERENCES roadmaps (id) ON DELETE SET NULL,
    ADD COLUMN roadmap_stage integer CHECK (roadmap_stage >= 0 AND roadmap_stage < 6);
