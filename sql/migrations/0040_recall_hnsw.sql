-- 0040: approximate nearest-neighbour indexes for heavy users' recall (issue 47; work in progress).
SELECT 1;
