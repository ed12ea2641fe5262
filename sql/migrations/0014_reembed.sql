-- 0014: switching embedders without downtime (`episodes reembed`, jobs/lifecycle/reembed.py).
--
-- A re-embed writes the new vectors into a second column, episodes.embedding_next vector(M), that
-- the job adds when it starts (its dimension is the new embedder's, so it cannot live here) and
-- that the switch renames to `embedding` after dropping the old one: metadata only, no table
-- rewrite. Until then recall, summarize and compress keep reading and writing `embedding`.
--
-- * reembed_state: the re-embed in progress (at most one row): the embedder it switches to, its
--   dimension and when it started. `episodes status` shows it; a second `episodes reembed` resumes it.
-- * episodes_reembed_stale(): while a re-embed runs, a trigger created by the job with this function
--   clears embedding_next whenever a row's `embedding` changes (a correction re-embeds it), so the
--   row is embedded again under its new text instead of switching to a stale vector.
-- * episodes_stamp_change() no longer stamps changed_xid in transactions that set
--   episodes.reembed_write: writing embedding_next changes nothing recall reads, and stamping every
--   row would make every warm recall copy read its user's rows again, batch after batch.

CREATE TABLE reembed_state (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    embedder   text NOT NULL,
    dim        integer NOT NULL CHECK (dim > 0),
    started_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT ON reembed_state TO episodes_app;

CREATE FUNCTION episodes_reembed_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.embedding IS DISTINCT FROM OLD.embedding THEN
        NEW.embedding_next := NULL;
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION episodes_stamp_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND current_setting('episodes.reembed_write', true) = 'on' THEN
        RETURN NEW;
    END IF;
    NEW.changed_xid := pg_current_xact_id();
    RETURN NEW;
END
$$;
