-- Spend (issue 18): a model call's cost is known (reported by the provider,
-- or computed from the price table) or unknown: NULL, never a silent 0.
-- cost_source says which: 'provider' | 'prices' | NULL (unknown).
-- Rows written before this migration kept 0 for "not reported": those
-- become unknown; a cost above 0 came from the provider.
ALTER TABLE model_usage ALTER COLUMN cost_usd DROP NOT NULL,
                        ALTER COLUMN cost_usd DROP DEFAULT;
ALTER TABLE model_usage ADD COLUMN cost_source text
    CHECK (cost_source IN ('provider', 'prices'));
UPDATE model_usage SET cost_source = 'provider' WHERE cost_usd > 0;
UPDATE model_usage SET cost_usd = NULL WHERE cost_source IS NULL;
ALTER TABLE model_usage ADD CONSTRAINT model_usage_cost_known
    CHECK ((cost_source IS NULL) = (cost_usd IS NULL));
-- The month's spend is summed by time.
CREATE INDEX model_usage_by_at ON model_usage (at);
