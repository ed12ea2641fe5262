-- 0033: the daily spend caps (issue 37, item 4; jobs/llm/spend.py).
--
-- `episodes run` and `episodes serve` read, before each claim, what the back end in use has spent since
-- the start of the UTC day (backend_spend_since, sql/spend.sql): the model-call rows of every tenant
-- created today. The only index on created_at led with tenant_id; this one finds a day's rows directly.
CREATE INDEX model_calls_created_idx ON model_calls (created_at);
