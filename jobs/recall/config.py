"""RecallConfig: the knobs of selection (scoring) and of fitting the block to its budget."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RecallConfig:
    """Selection constants. Production uses only these defaults: recall(), the API, MCP and the CLI
    take no RecallConfig and no variable sets one (docs/configuration.md). They are held in one
    frozen object so that the eval's baselines (`eval locomo`) and the tests can vary them.

    rrf_k, w_text and the relevance floor were chosen together on the five LoCoMo conversations, the
    only data there is, leaving one conversation out (docs/benchmarks.md, "How
    recall's defaults were chosen"); the decay coarsely. Treat the eval's figures as somewhat optimistic.
    """

    recent_n: int = 3  # the last N episodes are always offered ("recent"), compactly
    recent_full: bool = False  # render recent episodes in full instead of compactly
    # Room for the recent ones kept before the quotes (else they come after the quotes, if there is room). Off:
    # LoCoMo offline at 750 tokens, answer coverage 0.337 -> 0.405 with full_share 1.0 (issue 47, tuning data).
    reserve_recent: bool = False
    top_k: int = 12  # relevant episodes offered, best first (exact within the user's rows)
    rank_depth: int = 50  # RRF fuses each list's first rank_depth ranks (at least top_k)
    # Full summaries fill at most full_share of the budget, so the next-ranked episodes still get a compact
    # line each: more evidence sessions in the block at the cost of fewer in full. Chosen on LoCoMo by
    # answer coverage, leaving one conversation out (docs/benchmarks.md).
    full_share: float = 0.8
    # Quotes (with their headers) may fill this share of the budget (issue 47: 0.8 -> 1.0, LoCoMo offline at 750
    # tokens +0.02, tuning data); full summaries of episodes without lines stop at full_share.
    quote_share: float = 1.0
    # Within relevant and within possibly related, episodes of a month the opening message names (or of the
    # month after) are placed first (jobs.recall.time_cues): dates are what neither score knows.
    time_cues: bool = True
    # The relevance floor: an episode is "relevant" (and offered as such) only when its cosine similarity
    # to the opening message is >= relevant_similarity, or >= relevant_similarity_with_text while its
    # text match (ts_rank(search_tsv, q, 1)) is >= relevant_text. Below it the block keeps its recent
    # lines, open items and possibly related episodes (related_k), says nothing clearly relates. Chosen on
    # LoCoMo (reference summaries, MiniLM) jointly with w_text and rrf_k: the highest all-evidence
    # recall with <= 10 % of *foreign* questions (those of the other conversations) labelling anything
    # relevant; leaving each conversation out in turn gives 0.787 on the held-out one (0.800 on all five).
    # Similarity alone separates own from foreign questions worse (0.40: 81 % of own questions' evidence
    # clears it against 85 % here, with more foreign blocks labelled). A text match needs some
    # similarity too: ts_rank has no idea how common a word is. Set relevant_similarity=-1 for no floor.
    relevant_similarity: float = 0.5
    relevant_similarity_with_text: float = 0.35
    relevant_text: float = 0.004
    # ... or >= relevant_similarity_with_text while standing relevant_z standard deviations above the mean similarity
    # of the user's candidates: a long opening (a 90-word bug report) is less similar to everything, and its own
    # matter stands out of the user's background where it misses the absolute floor (issue 47, one developer's
    # history: the sched chat 0.484 at z 3.6, the slalog amendment 0.489 at z 3.7: both 4 -> 5 of 6, "nothing
    # relates" above a best match 2 -> 1 of 33). LoCoMo offline end to end: answer coverage unchanged (0.559 / 0.441),
    # foreign questions labelled 0.025 -> 0.026. All tuning data. Fewer than 14 candidates cannot reach z 3.5 (the
    # largest of n stands at most sqrt(n - 1) above their mean). None: off.
    relevant_z: float | None = 3.5
    # Below the floor, the related_k best fused scores with cosine similarity >= related_similarity are
    # offered as "possibly related" (never "relevant"), after the relevant ones: LoCoMo's evidence below
    # the floor is mostly among them. related_similarity keeps a block for an unrelated message short.
    related_k: int = 20
    related_similarity: float = 0.25
    rrf_k: float = 1.0  # reciprocal rank fusion: w / (rrf_k + rank); small k: the first ranks matter most
    w_vector: float = 1.0
    w_text: float = 0.75  # the text list counts less than the vector list (0.75 in every held-out choice)
    half_life_days: float = 180.0  # soft decay: the decaying part halves every half-life
    decay_floor: float = 0.85  # ... and never below this factor, so old but relevant episodes survive
    w_importance: float = 0.4  # score factor 1 + w * (importance - 0.5): 0.8 .. 1.2
    dedup_similarity: float = 0.97
    max_open_items: int = 8
    open_items_share: float = 0.25  # at most this share of the budget for open items
    # An open item is related to the opening message when its episode is relevant or at least this similar, and
    # the item holds one of the message's rarer words (jobs.recall.fitting._Fit.place_open_items).
    open_item_similarity: float = 0.4
    compact_chars: int = 200  # length of a compact line's text
    max_unsummarised: int = 2  # sessions not yet summarised, one line each of their last user messages
    # Episode lines (issue 36): the chosen episodes' verbatim lines best matching the opening message are
    # quoted under them. max_lines: lines read per recall (best first); line_similarity: the least cosine
    # similarity of a line worth its room; header_chars: the compact line above an episode's quotes.
    # line_neighbour: a line next to a matching one scores this share of its similarity (sql/recall.sql).
    max_lines: int = 150
    line_similarity: float = 0.2
    line_neighbour: float = 0.8
    # An episode above the relevance floor is "relevant" only if a line of it (when it has lines) is at least
    # this similar to the opening message; else it is possibly related (jobs.recall.fitting._line_supported).
    relevant_line_similarity: float = 0.45
    # A line's rank adds this share of its episode's similarity: the session that matches gets more of its lines.
    line_episode_weight: float = 0.25
    # The header above an episode's quotes: header_chars of its summary's best sentence, or with 0 the session's
    # day and labels alone ("- 9 July 2023 (relevant):"): the quotes say what was said, and a summary sentence cut
    # to fit told the reader little at the cost of a quote. Issue 47, LoCoMo offline (tuning data), answer
    # coverage at 1,500 / 750 tokens: 80 -> 50: +0.012 at 750; 50 -> 20: 0.481 / 0.339; 50 -> 0: 0.498 / 0.340.
    header_chars: int = 0
    # The best full_headers relevant (else possibly related) episodes show their full summary above their quotes
    # instead of a header_chars header: the session that matches best leads with what it decided. Chosen on
    # LoCoMo 26 and 30 (answer coverage 0.485 -> 0.502, all-evidence 0.922 -> 0.926; 2: 0.506 / 0.918) and
    # sde-bench's tuning half (9 -> 10 of 17 blocks cover the policy; 2: the same) (issue 36).
    # Issue 47, with day-only headers (header_chars 0), all tuning data: 1 -> 0 moved LoCoMo offline 0.495 -> 0.501
    # at 1,500 tokens and 0.339 -> 0.354 at 750, and sde-bench 0.545 -> 0.485 and 0.424 -> 0.364 (its answers are
    # the policy a decision chat settled, which the summary states): kept at 1.
    full_headers: int = 1
    # Lines as the unit of retrieval (issue 47): recall_lines searches every line of the user's candidates, ranked
    # by dense score and by full text (text_tsv, migration 0037), each rank within line_depth, fused by
    # w / (line_rrf_k + rank) (w_vector for the dense list, line_w_text for the lexical one). A line's priority
    # is its dense score + line_fused_weight * its fused score (+ its episode's share, line_episode_weight).
    line_depth: int = 100
    # Whose lines are searched: those of the line_episodes candidates closest to the opening message and the
    # line_episodes best by its words (all of a user with fewer episodes; every LoCoMo and sde-bench user): the
    # cost of a heavy user's recall grows with their episodes, not with their lines. recall_lines alone, a user of
    # 10,000 episodes and 299,926 lines (bench/api_load.py's data, EXPLAIN ANALYZE, one loaded machine): every
    # line 1,854 ms; 200 -> 165 ms; 100 -> 82 ms; 50 -> 70 ms (the 10,000 episodes' distances are ~45 ms of it).
    line_episodes: int = 100
    line_rrf_k: float = 10.0
    line_w_text: float = 1.0
    line_fused_weight: float = 20.0  # LoCoMo offline, 750 tokens: 0 -> 0.382, 2 -> 0.405, 20 -> 0.420 (tuning data)
    # A line at least line_relevant similar to the opening message (line_relevant_with_text with a lexical match)
    # makes its episode relevant: one of the best matches is said in it (jobs.recall.quotes.line_labels).
    line_relevant: float = 0.6
    line_relevant_with_text: float = 0.5
    # Newest wins: a later session's line at least newer_similarity alike (cosine of the lines' embeddings) to an
    # older session's line, and at least newer_share as similar to the opening message, is quoted whenever the
    # older one is (jobs.recall.quotes.later_values). LoCoMo offline (tuning data), answer coverage at 1,500 / 750
    # tokens: share 0: 0.559 / 0.435; 0.7: 0.560 / 0.440; 0.8: 0.567 / 0.451. 0.7: the deploy-window amendment of
    # tests/test_recall_line_search.py is 0.76 as similar to its question as the rule it changed.
    newer_similarity: float = 0.65
    newer_share: float = 0.7
