-- 0002: what `episodes serve` needs: a NOTIFY when a transcript becomes eligible, and the
-- bookkeeping of Message Batches submissions (which survive a restart).

CREATE FUNCTION episodes_notify_eligible() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Delivered at commit; the payload is only the tenant (no content leaves the table).
    PERFORM pg_notify('episodes_transcript_eligible', NEW.tenant_id);
    RETURN NULL;
END
$$;

CREATE TRIGGER transcripts_notify_eligible
    AFTER INSERT OR UPDATE OF ended_at, status, content_hash ON transcripts
    FOR EACH ROW
    WHEN (NEW.ended_at IS NOT NULL AND NEW.status = 'pending')
    EXECUTE FUNCTION episodes_notify_eligible();

-- One row per Message Batches submission. `id` is ours (written before submitting), `remote_id`
-- the API's. Claimed transcripts carry lease_owner = 'batch:' || id until results are ingested.
CREATE TABLE model_batches (
    id          text PRIMARY KEY,
    remote_id   text UNIQUE,
    status      text NOT NULL DEFAULT 'submitting'
                CHECK (status IN ('submitting', 'submitted', 'ingested', 'failed')),
    requests    integer NOT NULL CHECK (requests > 0),
    worker      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    counts      jsonb NOT NULL DEFAULT '{}'::jsonb,
    error       text
);

CREATE TABLE model_batch_items (
    batch_id      text NOT NULL REFERENCES model_batches (id) ON DELETE CASCADE,
    custom_id     text NOT NULL CHECK (custom_id ~ '^[a-zA-Z0-9_-]{1,64}$'),
    tenant_id     text NOT NULL,
    transcript_id bigint NOT NULL REFERENCES transcripts (id) ON DELETE CASCADE,
    content_hash  text NOT NULL,
    prompt_hash   text NOT NULL,
    PRIMARY KEY (batch_id, custom_id)
);
CREATE INDEX model_batch_items_transcript_idx ON model_batch_items (transcript_id);

GRANT SELECT ON model_batches TO episodes_app;
GRANT SELECT, INSERT, DELETE ON model_batch_items TO episodes_app;
ALTER TABLE model_batch_items ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON model_batch_items TO episodes_app
    USING (tenant_id = current_setting('episodes.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('episodes.tenant_id', true));
