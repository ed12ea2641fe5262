-- 0034: the Voyage embedder's recorded name is the name that configures it (jobs/embeddings/voyage.py).
--
-- The Voyage embedder used to call itself by its model alone ("voyage-3-lite"), and `episodes init`
-- recorded that in episodes_settings. No embedder answers to that name, so recall, which follows the
-- recorded embedder, could not find it again, and now that the embedder calls itself
-- "voyage:voyage-3-lite" (and "voyage:MODEL:DIM" for another dimension) a process configured with
-- EPISODES_EMBEDDER=voyage would take the database for another embedder's. The recorded name (and the
-- target of a re-embed in progress) gains the "voyage:" it lacked, so both find the embedder again.
-- Only a voyage-3-lite database can hold vectors (the embedder assumed 512 dimensions for every model);
-- another recorded model now gets its own dimension, and `episodes init` says to re-embed when it differs.

UPDATE episodes_settings SET value = 'voyage:' || value
WHERE key = 'embedder' AND value ~ '^voyage-[a-z0-9.-]+$';

UPDATE reembed_state SET embedder = 'voyage:' || embedder
WHERE embedder ~ '^voyage-[a-z0-9.-]+$';
