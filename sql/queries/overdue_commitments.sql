-- Question: Which commitments are overdue, who made them and how late are they?
-- Scope: tenant
-- Overdue = not recorded as done by a later session, and the due date (UTC) has passed.
SELECT user_id,
       committed_by,
       what,
       due,
       days_overdue,
       session_id
FROM analyst.commitments
WHERE status = 'overdue'
ORDER BY days_overdue DESC, user_id;
