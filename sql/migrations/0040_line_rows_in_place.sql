-- 0040: a line's words stay in its row (issue 47, the cost under load; docs/benchmarks.md).
--
-- Migration 0037 added text_tsv, a stored column of the line's lexemes, and with it the average row of
-- episode_lines grew past ~2 kB (the 1,544-byte embedding, the text, ~270 bytes of lexemes): the size above which
-- PostgreSQL's default moves a row's largest compressible values out to the table's TOAST relation. Every
-- recall then read each line's lexemes there, for its text match and its rank: a user with 10,000 episodes had
-- 6,092 lines ranked in 26,410 buffer reads and 52 ms, 299 MB of TOAST for 1.5M lines. toast_tuple_target = 8160
-- keeps rows up to ~8 kB whole, as 0006 did for episodes: 2,360 reads, ~35 ms (bench/recall.py's data).
--
-- It applies to rows written from now on. Lines written before stay as they are until the table is rewritten:
-- `VACUUM FULL episode_lines` at a quiet time (it locks the table; pg_repack does it online), as
-- docs/operations.md says under "Upgrading".
--
-- Through EXECUTE, as 0032 and 0037 do: on a cluster already distributed, Citus sends an ALTER TABLE's query
-- text on to the shards, and as a statement of this file that text would be the whole file.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE episode_lines SET (toast_tuple_target = 8160)';
END
$$;
