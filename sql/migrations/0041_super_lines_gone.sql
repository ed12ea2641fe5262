-- 0041: a super-summary holds no lines of its own (issue 47, the cost under load; docs/lifecycle.md).
--
-- Until now the compress job copied every line of a period's sessions under its super (0032's episode_lines), and
-- recall's line search read every line of each episode it picked: a super is one episode, so picking it read its
-- whole period at once. A user of 10,000 sessions with two years compressed: recall 110 ms -> 1.12 s
-- (bench/compressed_recall.py). Recall now searches the sessions' own lines, each session chosen by its own scores,
-- and quotes them under their super; the copies are read by nothing and go. The sessions keep their lines (they
-- stay for analysts, and every erasure or pruning of one deletes or rebuilds its super).
--
-- One statement on the colocated tables (both distributed by tenant_id): on a cluster it runs on every shard pair.
DELETE FROM episode_lines l
USING episodes e
WHERE e.tenant_id = l.tenant_id AND e.id = l.episode_id AND e.kind = 'super';
