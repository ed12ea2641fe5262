-- 0037: every line of a user's history is searchable by its words (issue 47). Work in progress.
SELECT 1;
