-- 0030: an `export` scope (issue 35, item 7).
--
-- `recall` allowed GET /v1/users/{id}/export: every raw transcript, event and correction held about a
-- user, while a recall key only needs the episodes recall shows. Export is a scope of its own now; a key
-- created with `--scopes recall` cannot export.
--
-- Existing keys: only those that hold `admin` (an operator's key: it can erase a user, and export is the
-- other half of a user's rights) get `export` added here, visibly (`episodes keys list` shows it). A key
-- without `admin` loses the export it had through `recall`: those are the keys handed to agents and hooks
-- (the documented ones are `recall,ingest`), whose holder should read what recall shows and no raw
-- transcript. An application that answers access requests through such a key gets a 403 that names the
-- scope; the operator creates a key with `--scopes export` for it (docs/service.md, "Keys and scopes").
ALTER TABLE api_keys DROP CONSTRAINT api_keys_scopes_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check
    CHECK (cardinality(scopes) >= 1
           AND scopes <@ ARRAY['recall', 'ingest', 'edit', 'write', 'admin', 'export']::text[]);
UPDATE api_keys SET scopes = scopes || 'export'::text
 WHERE 'admin' = ANY (scopes) AND NOT 'export' = ANY (scopes);
