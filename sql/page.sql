-- Named queries of the user's memory page (jobs/service/page_*.py).
-- The reads run inside Database.tenant(): row-level security already hides other tenants; each also
-- names the tenant and joins on tenant_id, so on a Citus cluster it goes whole to the tenant's node.

-- name: page_link_secret
-- The memory-link signing secret when EPISODES_LINK_SECRET is unset: drawn by the database on the first
-- ask (0027: no caller chooses it); every later ask (any worker, any restart) gets that one. Kept in the
-- owner-only episodes_secrets (0023), reached through an owner-rights function granted to the service's
-- role only.
SELECT episodes_link_secret() AS value

-- name: page_open_items
-- The user's open questions and commitments, as recall would offer them, newest first; stale as recall
-- reads it (past its due date by more than %(grace)s, or without one older than %(age)s: migration 0009).
SELECT ev.id, ev.episode_id, ev.type, ev.what, ev.who, ev.due, ev.occurred_at,
       episodes_item_stale(ev.due, ev.occurred_at, now(), %(grace)s::interval, %(age)s::interval) AS stale
FROM episode_events ev
JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
WHERE ev.tenant_id = %(tenant_id)s AND ev.user_id = %(user_id)s
  AND ev.type IN ('open_question', 'commitment') AND ev.status = 'open'
  AND e.kind = 'session' AND e.status = 'current'
ORDER BY ev.occurred_at DESC, ev.id DESC
LIMIT %(limit)s

-- name: page_episode_owner
-- Whose an episode is (the page acts only on its own user's episodes).
SELECT user_id, kind, started_at, ended_at, period_start, period_end
FROM episodes WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND status = 'current'

-- name: page_event_owner
SELECT ev.user_id, ev.episode_id, ev.type, ev.what
FROM episode_events ev JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
WHERE ev.tenant_id = %(tenant_id)s AND ev.id = %(id)s AND e.kind = 'session' AND e.status = 'current'

-- name: page_user_erased_since
-- Whether the link's user was erased as a whole (`episodes forget`, DELETE /v1/users/{id}) since the
-- link was made: such a link shows nothing any more, not even what arrived after the erasure.
SELECT EXISTS (SELECT 1 FROM erasures
               WHERE tenant_id = %(tenant_id)s AND user_hash = %(user_hash)s AND scope = 'user'
                 AND requested_at >= %(since)s) AS erased
