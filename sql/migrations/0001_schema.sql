-- 0001: the whole data model (DESIGN.md, "Data model").
-- Applied by jobs/migrate.py inside one transaction together with its schema_migrations row.
-- The embedding dimension comes from the session setting episodes.embedding_dim, which the
-- runner sets from the configured embedder before applying migrations.

CREATE EXTENSION IF NOT EXISTS vector;

-- Settings fixed at initialisation (embedding dimension and embedder name).
CREATE TABLE episodes_settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO episodes_settings (key, value)
VALUES ('embedding_dim', current_setting('episodes.embedding_dim')),
       ('embedder', current_setting('episodes.embedder'));

-- ---------------------------------------------------------------------------------------------
-- transcripts: the input, one row per (tenant, session), with its work state beside it.
-- status: pending (eligible once ended_at is set) -> running (claimed, lease) -> done | dead.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE transcripts (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       text NOT NULL CHECK (tenant_id ~ '^[A-Za-z0-9_.:@-]{1,128}$'),
    user_id         text NOT NULL CHECK (length(user_id) BETWEEN 1 AND 256),
    session_id      text NOT NULL CHECK (length(session_id) BETWEEN 1 AND 256),
    agent_id        text,
    purpose         text NOT NULL DEFAULT 'general' CHECK (purpose ~ '^[a-z0-9_-]{1,64}$'),
    started_at      timestamptz,
    ended_at        timestamptz,
    messages        jsonb NOT NULL CHECK (jsonb_typeof(messages) = 'array' AND jsonb_array_length(messages) > 0),
    message_count   integer GENERATED ALWAYS AS (jsonb_array_length(messages)) STORED,
    content_hash    text NOT NULL,
    source          text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    -- work state
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'running', 'done', 'dead')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_owner     text,
    lease_until     timestamptz,
    last_error      text,
    UNIQUE (tenant_id, session_id),
    CHECK (ended_at IS NULL OR started_at IS NULL OR ended_at >= started_at),
    CHECK ((status = 'running') = (lease_owner IS NOT NULL AND lease_until IS NOT NULL))
);
-- The claim queue: closed, pending, due. Small partial index; a claim reads it in order.
CREATE INDEX transcripts_claim_idx ON transcripts (next_attempt_at)
    WHERE status = 'pending' AND ended_at IS NOT NULL;
-- Expired leases (rescue of work held by a dead worker).
CREATE INDEX transcripts_lease_idx ON transcripts (lease_until) WHERE status = 'running';
CREATE INDEX transcripts_user_idx ON transcripts (tenant_id, user_id, ended_at DESC);

-- ---------------------------------------------------------------------------------------------
-- episodes: one per summarised session (kind 'session') or per super-summary (kind 'super').
-- ---------------------------------------------------------------------------------------------
CREATE TABLE episodes (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id          text NOT NULL,
    user_id            text NOT NULL,
    kind               text NOT NULL CHECK (kind IN ('session', 'super')),
    transcript_id      bigint REFERENCES transcripts (id) ON DELETE SET NULL,
    session_id         text,
    purpose            text NOT NULL DEFAULT 'general',
    summary            text NOT NULL CHECK (length(summary) BETWEEN 1 AND 4000),
    topic_tags         text[] NOT NULL DEFAULT '{}' CHECK (cardinality(topic_tags) <= 5),
    importance         real NOT NULL CHECK (importance >= 0 AND importance <= 1),
    started_at         timestamptz NOT NULL,
    ended_at           timestamptz NOT NULL,
    period_start       date,
    period_end         date,
    search_tsv         tsvector NOT NULL DEFAULT ''::tsvector,
    model              text NOT NULL,
    prompt_version     text NOT NULL,
    content_hash       text,
    input_tokens       integer NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens      integer NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens  integer NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_tokens integer NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
    cost_usd           numeric(12, 6) NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    dropped_events     integer NOT NULL DEFAULT 0 CHECK (dropped_events >= 0),
    dropped_entities   integer NOT NULL DEFAULT 0 CHECK (dropped_entities >= 0),
    status             text NOT NULL DEFAULT 'current' CHECK (status IN ('current', 'superseded')),
    superseded_by      bigint REFERENCES episodes (id) ON DELETE SET NULL,
    compressed_into    bigint REFERENCES episodes (id) ON DELETE SET NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    CHECK (ended_at >= started_at),
    CHECK (kind <> 'session' OR session_id IS NOT NULL),
    CHECK (kind <> 'super' OR (period_start IS NOT NULL AND period_end IS NOT NULL AND period_end >= period_start)),
    CHECK (compressed_into IS NULL OR kind = 'session')
);
DO $$
BEGIN
    EXECUTE format('ALTER TABLE episodes ADD COLUMN embedding vector(%s)',
                   current_setting('episodes.embedding_dim')::int);
END
$$;
-- Keep vectors and the search vector in the row instead of TOAST: recall scans a user's rows
-- exactly, and out-of-line values cost extra page reads per candidate (measured ~1.7x on users
-- with 10,000 episodes).
ALTER TABLE episodes ALTER COLUMN embedding SET STORAGE MAIN, ALTER COLUMN search_tsv SET STORAGE MAIN;
-- One current session episode per (tenant, session): a re-run or a second worker cannot double it.
CREATE UNIQUE INDEX episodes_one_current_session
    ON episodes (tenant_id, session_id) WHERE kind = 'session' AND status = 'current';
-- One current super-summary per (tenant, user, period).
CREATE UNIQUE INDEX episodes_one_current_super
    ON episodes (tenant_id, user_id, period_start, period_end) WHERE kind = 'super' AND status = 'current';
-- Per-user recency and the exact per-user candidate scan used by recall.
CREATE INDEX episodes_user_recent_idx ON episodes (tenant_id, user_id, ended_at DESC) WHERE status = 'current';
-- Full text over summary, tags, events and entities (search_tsv is written with the episode).
CREATE INDEX episodes_search_idx ON episodes USING gin (search_tsv);
CREATE INDEX episodes_transcript_idx ON episodes (transcript_id);

-- ---------------------------------------------------------------------------------------------
-- typed key events; the types are a lookup, extendable by inserting a row.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE event_types (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z_]{1,32}$'),
    description text NOT NULL
);
INSERT INTO event_types (name, description) VALUES
    ('decision', 'Something the user (or the agent with the user) decided.'),
    ('open_question', 'A question raised and not answered in the session.'),
    ('commitment', 'Something someone promised to do, possibly with a due date.'),
    ('surprise', 'Something unexpected that the user noticed or reacted to.');

CREATE TABLE episode_events (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id          text NOT NULL,
    user_id            text NOT NULL,
    episode_id         bigint NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    ordinal            integer NOT NULL CHECK (ordinal >= 0),
    type               text NOT NULL REFERENCES event_types (name),
    what               text NOT NULL CHECK (length(what) BETWEEN 1 AND 2000),
    who                text,
    due                date,
    occurred_at        timestamptz NOT NULL,
    evidence           integer[] NOT NULL CHECK (cardinality(evidence) >= 1),
    evidence_quote     text,
    status             text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved', 'done', 'n/a')),
    resolved_by        bigint REFERENCES episodes (id) ON DELETE SET NULL,
    resolved_at        timestamptz,
    source_event_id    bigint REFERENCES episode_events (id) ON DELETE SET NULL,
    UNIQUE (episode_id, ordinal),
    CHECK (0 <= ALL (evidence))
);
CREATE INDEX episode_events_user_idx ON episode_events (tenant_id, user_id, type, occurred_at DESC);
CREATE INDEX episode_events_episode_idx ON episode_events (episode_id);
CREATE INDEX episode_events_open_idx ON episode_events (tenant_id, user_id)
    WHERE type IN ('open_question', 'commitment') AND status = 'open';

CREATE TABLE episode_entities (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  text NOT NULL,
    user_id    text NOT NULL,
    episode_id bigint NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    kind       text NOT NULL CHECK (kind IN ('person', 'org', 'product', 'project', 'place', 'other')),
    UNIQUE (episode_id, name, kind)
);
CREATE INDEX episode_entities_user_idx ON episode_entities (tenant_id, user_id, lower(name));

-- Lineage: which session episodes a super-summary replaced.
CREATE TABLE episode_lineage (
    tenant_id         text NOT NULL,
    user_id           text NOT NULL,
    super_episode_id  bigint NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    source_episode_id bigint NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    PRIMARY KEY (super_episode_id, source_episode_id)
);
CREATE INDEX episode_lineage_source_idx ON episode_lineage (source_episode_id);

-- ---------------------------------------------------------------------------------------------
-- operations: job runs (cross-tenant, no tenant data) and one row per model call.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE job_runs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job         text NOT NULL,
    worker      text NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    status      text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'ok', 'failed')),
    counts      jsonb NOT NULL DEFAULT '{}'::jsonb,
    error       text,
    CHECK (finished_at IS NULL OR finished_at >= started_at)
);
CREATE INDEX job_runs_recent_idx ON job_runs (job, started_at DESC);

CREATE TABLE model_calls (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id          text NOT NULL,
    user_id            text,
    transcript_id      bigint REFERENCES transcripts (id) ON DELETE SET NULL,
    job_run_id         bigint REFERENCES job_runs (id) ON DELETE SET NULL,
    template           text NOT NULL,
    prompt_hash        text NOT NULL,
    model              text NOT NULL,
    batch              boolean NOT NULL DEFAULT false,
    input_tokens       integer NOT NULL DEFAULT 0,
    output_tokens      integer NOT NULL DEFAULT 0,
    cache_read_tokens  integer NOT NULL DEFAULT 0,
    cache_write_tokens integer NOT NULL DEFAULT 0,
    cost_usd           numeric(12, 6) NOT NULL DEFAULT 0,
    latency_ms         integer NOT NULL DEFAULT 0 CHECK (latency_ms >= 0),
    outcome            text NOT NULL CHECK (outcome IN ('ok', 'invalid', 'refusal', 'max_tokens', 'transient', 'error')),
    error              text,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX model_calls_tenant_day_idx ON model_calls (tenant_id, created_at);

-- ---------------------------------------------------------------------------------------------
-- Tenant isolation: every table with a tenant_id has row-level security keyed on the
-- transaction-local setting episodes.tenant_id. Normal work runs as the non-owner role
-- episodes_app, which the policies bind; the owner (operator) bypasses them.
-- ---------------------------------------------------------------------------------------------
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'episodes_app') THEN
        CREATE ROLE episodes_app NOLOGIN NOBYPASSRLS;
    END IF;
    EXECUTE format('GRANT episodes_app TO %I', current_user);
END
$$;
GRANT USAGE ON SCHEMA public TO episodes_app;
GRANT SELECT ON episodes_settings, event_types TO episodes_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON transcripts, episodes, episode_events, episode_entities,
    episode_lineage, model_calls TO episodes_app;
GRANT SELECT, INSERT, UPDATE ON job_runs TO episodes_app;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO episodes_app;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['transcripts', 'episodes', 'episode_events', 'episode_entities',
                             'episode_lineage', 'model_calls']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %I TO episodes_app '
            'USING (tenant_id = current_setting(''episodes.tenant_id'', true)) '
            'WITH CHECK (tenant_id = current_setting(''episodes.tenant_id'', true))', t);
    END LOOP;
END
$$;
