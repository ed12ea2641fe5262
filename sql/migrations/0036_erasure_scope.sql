-- 0036: erasure scoped by tenant in run history, erased turns of forks, no erasure date to ingest keys (issue 46).
-- (work in progress)
SELECT 1;
