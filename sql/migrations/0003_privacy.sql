-- 0003: privacy. An audit trail of erasures (`episodes forget`) that holds no content and no user id.
--
-- An erasure row says that a user of a tenant was erased, when, how many rows of each kind went,
-- and whether the transcripts were kept. The user appears only as user_hash =
-- sha256(salt || 0x00 || tenant_id || 0x00 || user_id), hex, with a random salt made here once per
-- database: an operator who is asked "did you erase user X?" can recompute it (jobs.forget.
-- erasures_of), but the table alone names nobody, and the hash cannot be looked up in a table
-- precomputed for another deployment. It is pseudonymous, not anonymous: whoever holds the
-- database and a candidate id can test that id.
--
-- erasures carries tenant_id, so like every tenant table it has row-level security. The app role
-- may read and append (forget runs as the app role inside the tenant's transaction); it may not
-- change or delete audit rows.

INSERT INTO episodes_settings (key, value)
VALUES ('erasure_salt', encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')), 'hex'))
ON CONFLICT (key) DO NOTHING;

CREATE TABLE erasures (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id        text NOT NULL,
    user_hash        text NOT NULL CHECK (user_hash ~ '^[0-9a-f]{64}$'),
    requested_at     timestamptz NOT NULL DEFAULT now(),
    -- Numbers only ({"episodes": 3, ...}), so no content can ever be written here.
    counts           jsonb NOT NULL DEFAULT '{}'::jsonb
                     CHECK (jsonb_typeof(counts) = 'object'
                            AND NOT jsonb_path_exists(counts, '$.* ? (@.type() != "number")')),
    kept_transcripts boolean NOT NULL DEFAULT false
);
CREATE INDEX erasures_lookup_idx ON erasures (tenant_id, user_hash);

GRANT SELECT, INSERT ON erasures TO episodes_app;
GRANT USAGE ON SEQUENCE erasures_id_seq TO episodes_app;
ALTER TABLE erasures ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON erasures TO episodes_app
    USING (tenant_id = current_setting('episodes.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('episodes.tenant_id', true));
