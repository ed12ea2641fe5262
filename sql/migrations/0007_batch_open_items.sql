-- A Message Batch request offers the user's open questions and commitments like a live call does;
-- the ids offered are kept with the item, so the answer may resolve exactly those (grounding).
ALTER TABLE model_batch_items ADD COLUMN offered_items bigint[] NOT NULL DEFAULT '{}';
