-- Question: What decisions has each user made about pricing (plans, seats, discounts, billing)?
-- Scope: tenant
-- Matches the decision's wording with English full-text search (stemmed: "pricing" also finds
-- "price" and "priced"), amounts such as "$49", or a pricing topic tag on the decision's episode.
SELECT user_id,
       (decided_at AT TIME ZONE 'UTC')::date AS decided_on,
       what,
       topic_tags,
       session_id
FROM analyst.decisions
WHERE to_tsvector('english', what)
          @@ websearch_to_tsquery('english', 'price or pricing or plan or seat or discount or billing or tier')
   OR what ~ '\$[0-9]'
   OR topic_tags && ARRAY['pricing', 'price', 'plan', 'plans', 'billing', 'seats', 'discount']
ORDER BY user_id, decided_at;
