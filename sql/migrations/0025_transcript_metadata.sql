-- 0025: a transcript's free-form metadata (issue 30).
--
-- Hosts hand over data that is not conversation: a Claude Code session's project (its working
-- directory), git branch and client version; whatever a host application keeps beside a session.
-- It used to be dropped without a word; now a record's `metadata` (a JSON object, at most 16 KiB,
-- checked by jobs/models.py) is kept here, so recall can scope by project later. NULL: none given.

ALTER TABLE transcripts ADD COLUMN metadata jsonb;
ALTER TABLE transcripts ADD CONSTRAINT transcripts_metadata_object
    CHECK (metadata IS NULL OR jsonb_typeof(metadata) = 'object');
COMMENT ON COLUMN transcripts.metadata IS
    'Free-form data of the session as the host gave it (a JSON object), e.g. {"project": "/home/me/app"}.';
