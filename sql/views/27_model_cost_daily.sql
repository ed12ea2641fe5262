-- analyst.model_cost_daily: its query and its comments. The view analysts query, analyst.model_cost_daily, is made by
-- 90_scoped.sql over this internal one (read with the owner's rights, scoped to the caller's tenant) and
-- gets these comments. Every join includes tenant_id, so the query runs on a Citus cluster too.

CREATE VIEW analyst._model_cost_daily AS
SELECT tenant_id,
       (created_at AT TIME ZONE 'UTC')::date AS day,
       CASE WHEN batch THEN 'batch' ELSE 'live' END AS mode,
       count(*) AS calls,
       count(*) FILTER (WHERE outcome <> 'ok') AS failed_calls,
       sum(input_tokens)::bigint AS input_tokens,
       sum(output_tokens)::bigint AS output_tokens,
       sum(cache_read_tokens)::bigint AS cache_read_tokens,
       sum(cache_write_tokens)::bigint AS cache_write_tokens,
       sum(cost_usd) AS cost_usd,
       array_agg(DISTINCT model ORDER BY model) AS models
FROM model_calls
GROUP BY tenant_id, (created_at AT TIME ZONE 'UTC')::date, batch;

COMMENT ON VIEW analyst._model_cost_daily IS
    'Model calls per tenant, UTC day and mode (batch = Message Batches at half price, live = Messages API), '
    'with tokens and estimated cost. Every call counts, failed ones included.';
COMMENT ON COLUMN analyst._model_cost_daily.tenant_id IS 'Tenant the calls were made for.';
COMMENT ON COLUMN analyst._model_cost_daily.day IS 'UTC calendar day of the call.';
COMMENT ON COLUMN analyst._model_cost_daily.mode IS 'batch (Message Batches API) or live (Messages API).';
COMMENT ON COLUMN analyst._model_cost_daily.calls IS 'Number of model calls.';
COMMENT ON COLUMN analyst._model_cost_daily.failed_calls IS
    'Calls whose outcome was not ok (invalid, refusal, max_tokens, transient, error).';
COMMENT ON COLUMN analyst._model_cost_daily.input_tokens IS 'Uncached input tokens.';
COMMENT ON COLUMN analyst._model_cost_daily.output_tokens IS 'Output tokens.';
COMMENT ON COLUMN analyst._model_cost_daily.cache_read_tokens IS
    'Input tokens read from the prompt cache (0.1x price).';
COMMENT ON COLUMN analyst._model_cost_daily.cache_write_tokens IS
    'Input tokens written to the prompt cache (1.25x price).';
COMMENT ON COLUMN analyst._model_cost_daily.cost_usd IS
    'Estimated cost in USD as recorded per call (EPISODES_PRICE_* at call time; batch at half price).';
COMMENT ON COLUMN analyst._model_cost_daily.models IS 'Models called that day.';
