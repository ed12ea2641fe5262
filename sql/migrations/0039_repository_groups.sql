-- 0039: explicit groups of repositories that share memory (issue 49). Placeholder: taken, being written.
SELECT 1;
