-- 0024: API key scopes that mean what their help says (issue 29).
--
-- `write` allowed a key to post transcripts and also to correct, erase and pin episodes, while
-- `episodes keys create --help` said "write: transcripts". Two scopes now tell them apart:
--   ingest  POST /v1/transcripts
--   edit    PATCH / DELETE /v1/episodes/{id}, PUT / DELETE …/pin, the memory page's link (with recall),
--           the MCP tool that forgets an episode
-- Existing `write` keys stay as they are and keep meaning both (ingest and edit): narrowing them here
-- would break, without warning, every application that corrects or forgets through its key. An
-- operator narrows a key by creating one with `--scopes ingest` (or `edit`) and revoking the old one.
ALTER TABLE api_keys DROP CONSTRAINT api_keys_scopes_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check
    CHECK (cardinality(scopes) >= 1 AND scopes <@ ARRAY['recall', 'ingest', 'edit', 'write', 'admin']::text[]);
