-- Question: Per user, how many commitments were kept, are still open, or are overdue?
-- Scope: tenant
SELECT user_id,
       count(*) AS commitments,
       count(*) FILTER (WHERE status = 'done') AS done,
       count(*) FILTER (WHERE status = 'open') AS open,
       count(*) FILTER (WHERE status = 'overdue') AS overdue,
       round(100.0 * count(*) FILTER (WHERE status = 'done') / count(*), 1) AS done_pct
FROM analyst.commitments
GROUP BY user_id
ORDER BY overdue DESC, user_id;
