-- 0011: the user's control over single episodes: correct one, forget one (jobs/privacy/correct.py,
-- jobs/privacy/erase_episode.py; README "Correcting and forgetting one episode").
--
-- episode_corrections is both the audit trail of corrections and the durable record of what the
-- user said, per (tenant, session): when the session is summarised again (changed transcript, new
-- prompt version) the summarize job re-applies the session's corrections to the new episode, in
-- order (jobs/privacy/standing.py). One row per changed field:
--   field 'summary'        old_value / new_value: the summary before and after
--   field 'event.text'     event_type, old_value: the event's text before, new_value: after
--   field 'event.status'   event_type, event_text: the event's text, old_value / new_value: statuses
--   field 'event.drop'     event_type, old_value: the dropped event's text
-- The values are personal data. Erasing the episode (or the user) removes them, and the session
-- and actor with them, and sets erased_at: the row still says that a correction of that field of
-- that episode happened, when, and nothing else. The app role may read, append and scrub; it may
-- not delete an audit row.

CREATE TABLE episode_corrections (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    text NOT NULL,
    user_id      text,
    session_id   text,
    episode_id   bigint NOT NULL,  -- no foreign key: the audit outlives the episode
    event_id     bigint,
    field        text NOT NULL CHECK (field IN ('summary', 'event.text', 'event.status', 'event.drop')),
    event_type   text,
    event_text   text,
    old_value    text,
    new_value    text,
    actor        text CHECK (length(actor) BETWEEN 1 AND 200),
    corrected_at timestamptz NOT NULL DEFAULT now(),
    erased_at    timestamptz,
    CHECK (erased_at IS NOT NULL OR (user_id IS NOT NULL AND actor IS NOT NULL)),
    CHECK (erased_at IS NULL OR (user_id IS NULL AND session_id IS NULL AND event_text IS NULL
                                 AND old_value IS NULL AND new_value IS NULL AND actor IS NULL))
);
CREATE INDEX episode_corrections_session_idx ON episode_corrections (tenant_id, session_id, id)
    WHERE erased_at IS NULL;
CREATE INDEX episode_corrections_episode_idx ON episode_corrections (tenant_id, episode_id);
CREATE INDEX episode_corrections_user_idx ON episode_corrections (tenant_id, user_id) WHERE erased_at IS NULL;

GRANT SELECT, INSERT, UPDATE ON episode_corrections TO episodes_app;
GRANT USAGE ON SEQUENCE episode_corrections_id_seq TO episodes_app;
ALTER TABLE episode_corrections ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON episode_corrections TO episodes_app
    USING (tenant_id = current_setting('episodes.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('episodes.tenant_id', true));

-- A transcript whose episode the user asked to forget is kept (it is the host's record of the chat)
-- but never summarised again, whatever path would requeue it (a changed upload, `episodes retry`,
-- a lease rescue): the trigger holds it at done. Clearing forgotten_at (an operator's decision)
-- lets it be summarised again.
ALTER TABLE transcripts ADD COLUMN forgotten_at timestamptz;

CREATE FUNCTION transcripts_stay_forgotten() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.forgotten_at IS NOT NULL AND NEW.status IN ('pending', 'running') THEN
        NEW.status := 'done';
        NEW.lease_owner := NULL;
        NEW.lease_until := NULL;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER transcripts_stay_forgotten BEFORE UPDATE ON transcripts
    FOR EACH ROW EXECUTE FUNCTION transcripts_stay_forgotten();

-- An erasure row may now stand for one episode (scope 'episode': user_hash names its owner, counts
-- are numbers as before) as well as for a whole user.
ALTER TABLE erasures ADD COLUMN scope text NOT NULL DEFAULT 'user' CHECK (scope IN ('user', 'episode'));
