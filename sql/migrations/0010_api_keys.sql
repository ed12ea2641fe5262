-- 0010: API keys of `episodes api` (README, "The memory service").
--
-- A key is 256 random bits shown once; only its SHA-256 is stored. A fast hash is enough: a slow
-- KDF protects low-entropy secrets (passwords) from guessing, and 2^256 keys cannot be guessed at
-- any speed. The table holds no tenant data and is the owner's alone: episodes_app (the role every
-- request runs as) gets no privilege on it, so a query under row-level security cannot read a hash.
CREATE TABLE api_keys (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    prefix       text NOT NULL UNIQUE CHECK (prefix ~ '^ep_[A-Za-z0-9_-]{8}$'),
    key_hash     bytea NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    tenant_id    text NOT NULL CHECK (tenant_id ~ '^[A-Za-z0-9_.:@-]{1,128}$'),
    name         text CHECK (length(name) <= 200),
    scopes       text[] NOT NULL CHECK (cardinality(scopes) >= 1
                                        AND scopes <@ ARRAY['recall', 'write', 'admin']::text[]),
    rate_limit   real CHECK (rate_limit IS NULL OR rate_limit > 0),  -- requests per second, per key
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
REVOKE ALL ON api_keys FROM PUBLIC;
REVOKE ALL ON api_keys FROM episodes_app;
-- Defence in depth, like every table with a tenant_id: should a grant ever be added by mistake,
-- the app role would still see only its own tenant's keys. The owner (who verifies keys) bypasses it.
ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON api_keys TO episodes_app
    USING (tenant_id = current_setting('episodes.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('episodes.tenant_id', true));
