-- Question: What did model calls cost per tenant and day, live versus batch, and how many failed?
-- Scope: operator
-- Run as episodes_operator to compare tenants; as episodes_analyst it shows the scoped tenant only.
SELECT tenant_id,
       day,
       sum(calls) AS calls,
       sum(failed_calls) AS failed_calls,
       sum(input_tokens + cache_read_tokens + cache_write_tokens) AS input_tokens,
       sum(output_tokens) AS output_tokens,
       sum(cost_usd) FILTER (WHERE mode = 'live') AS live_cost_usd,
       sum(cost_usd) FILTER (WHERE mode = 'batch') AS batch_cost_usd,
       sum(cost_usd) AS cost_usd
FROM analyst.model_cost_daily
GROUP BY tenant_id, day
ORDER BY day DESC, cost_usd DESC;
