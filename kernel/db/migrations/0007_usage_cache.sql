-- Kernel memory: prompt caching in model usage (kernel/model). Of a call's
-- input_tokens (all of them, as before), cache_read_tokens were read from the
-- provider's prompt cache and cache_write_tokens written to it; the uncached
-- rest is input_tokens - cache_read_tokens. Rows from before are 0 (unknown
-- then: nothing was marked cacheable).

ALTER TABLE model_usage
    ADD COLUMN cache_read_tokens  bigint NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    ADD COLUMN cache_write_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0);
