-- 0030: an `export` scope (issue 35, item 7).
--
-- `recall` allowed GET /v1/users/{id}/export: every raw transcript, event and correction held about a
-- user, while a recall key only needs the episodes recall shows. Export is a scope of its own now; a key
-- created with `--scopes recall` cannot export.
--
-- Existing keys that hold `recall` get `export` added here, visibly (`episodes keys list` shows it):
-- taking it away would break, without warning, the applications that answer their users' access
-- requests through their key, and 0024 kept `write` whole for the same reason. An operator narrows such a
-- key by creating one with `--scopes recall` and revoking the old one (docs/service.md, "Keys and scopes").
ALTER TABLE api_keys DROP CONSTRAINT api_keys_scopes_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check
    CHECK (cardinality(scopes) >= 1
           AND scopes <@ ARRAY['recall', 'ingest', 'edit', 'write', 'admin', 'export']::text[]);
UPDATE api_keys SET scopes = scopes || 'export'::text
 WHERE 'recall' = ANY (scopes) AND NOT 'export' = ANY (scopes);
