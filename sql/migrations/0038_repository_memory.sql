-- 0038: memory follows the git repository (issue 49). Placeholder: the number is taken; content follows.
SELECT 1;
