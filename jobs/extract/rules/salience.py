"""What matters in a transcript: a sentence's rule score, its lexical centrality, and the key phrases
that become topic tags."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable

from jobs.extract.rules.agent import WORK_DONE, is_format_tag
from jobs.extract.rules.cues import GENERIC_PRAISE, PLEASANTRY, SECOND_PERSON, cue
from jobs.extract.rules.specifics import CAPITALISED
from jobs.extract.rules.text import (
    STOPWORDS,
    content_words,
    has_cjk,
    has_number,
    normalise,
    words,
)
from jobs.extract.rules.topics import determined_phrases, is_topic, verbs_in

_SELF_STATEMENT = re.compile(r"^\W*(?:\w+,\s*)?(?:I|I'm|I've|I'll|We|We'll|We're|My)\b")


def lexical_score(text: str, by_assistant: bool) -> float:
    """Rule bonuses and penalties added to a sentence's centrality. Why each: specific sentences (names,
    numbers, content words, a speaker's own facts and plans) make summaries; greetings, praise, questions,
    fragments and photo captions do not."""
    n_words = len(words(text))
    informative = len(content_words(re.sub(r"\[[^\]]*\]", " ", text)))
    found = cue(text)
    score = 0.025 * min(informative, 8)
    score += 0.08 if CAPITALISED.search(text) else 0.0
    score += 0.06 if has_number(text) else 0.0
    score += 0.08 if not by_assistant and _SELF_STATEMENT.match(text) else 0.0
    score += 0.1 if found and found[0] in ("decision", "commitment") else 0.0
    score += 0.15 if by_assistant and WORK_DONE.match(text) else 0.0  # what the session achieved
    score -= 0.12 if GENERIC_PRAISE.search(text) and informative <= 3 else 0.0
    score -= 0.06 if SECOND_PERSON.search(text) else 0.0  # mostly reactions to the other speaker
    score -= 0.2 if text.lstrip().startswith("[") else 0.0  # an annotation such as a photo caption
    score -= 0.15 if re.search(r"https?://|\w+\(\)|[{}<>=]{1}\S*[{}<>=]", text) else 0.0  # URLs and code read badly
    score -= 0.25 if n_words < 5 else 0.1 if n_words > 60 else 0.0
    score -= 0.3 if PLEASANTRY.search(text) else 0.0
    score -= 0.12 if text.rstrip().endswith("?") else 0.0
    return score


def tfidf_centrality(texts: list[str]) -> list[float]:
    """Cosine of each text's tf-idf vector to the whole transcript's: a cheap lexical centrality,
    used to choose which sentences are worth embedding."""
    bags = [Counter(content_words(t)) for t in texts]
    df = Counter(w for bag in bags for w in bag)
    weighted = [{w: c * math.log(1 + len(texts) / df[w]) for w, c in bag.items()} for bag in bags]
    total: Counter[str] = Counter()
    for vec in weighted:
        total.update(vec)
    total_norm = math.sqrt(sum(v * v for v in total.values())) or 1.0
    out = []
    for vec in weighted:
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        out.append(sum(v * total[w] for w, v in vec.items()) / (norm * total_norm))
    return out


def key_phrases(sentences: list[tuple[str, float]], names: Iterable[str], limit: int = 5) -> list[str]:
    """Up to ``limit`` lowercase key phrases from (sentence, centrality) pairs: runs of content words that can
    be topics (:func:`jobs.extract.rules.topics.is_topic`; a noun compound after an article counts when said
    once), scored by frequency weighted by centrality, boosted when the transcript capitalises them
    mid-sentence (places, products). A longer phrase replaces a shorter one it covers when it
    accounts for at least half of its uses ("team plan" over "team")."""
    lowered = {normalise(n).lower() for n in names}
    proper = {w.lower() for text, _ in sentences for w in re.findall(r"(?<=\w[ ,])([A-Z][a-z]+)", text)}
    score: dict[str, float] = defaultdict(float)
    tf: Counter[str] = Counter()
    heads: set[str] = set()  # words that end a run somewhere: nouns, not only modifiers ("outer" in "outer web")
    for text, centrality in sentences:
        weight = 0.5 + max(centrality, 0.0)
        for run in _runs(text, lowered):
            heads.add(run[-1])
            for n in (1, 2, 3):
                for k in range(len(run) - n + 1):
                    phrase = " ".join(run[k : k + n])
                    tf[phrase] += 1
                    boost = 1.5 if any(w in proper for w in run[k : k + n]) else 1.0
                    score[phrase] += weight * boost * (1.0, 1.6, 1.8)[n - 1]
    texts = [text for text, _ in sentences]
    verbs, compounds = verbs_in(texts), determined_phrases(texts)
    candidates = [
        p
        for p in score
        if (
            (" " in p and (tf[p] >= 2 or p in compounds))
            or (" " not in p and not p.endswith(("ed", "ly")) and p in heads)
        )
        and not is_format_tag(p)  # "tool", "tool result", "user": the transcript's format, not a topic
        and is_topic(p, verbs)
    ]  # a noun phrase naming the subject, not "update" or "tests"
    candidates.sort(key=lambda p: (-round(score[p], 5), p))
    chosen: list[str] = []
    del candidates[12 * limit :]  # enough to fill and refine ``limit`` slots
    for phrase in candidates:
        clashes = [c for c in chosen if _overlaps(c, phrase)]
        if not clashes:
            if len(chosen) < limit:
                chosen.append(phrase)
        elif all(set(c.split()) < set(phrase.split()) and tf[phrase] * 2 >= tf[c] for c in clashes):
            chosen[chosen.index(clashes[0])] = phrase
            chosen = [c for c in chosen if c == phrase or c not in clashes]
    return [c[:40] for c in chosen]


def _runs(text: str, names: set[str]) -> list[list[str]]:
    """Maximal runs of content words (split at stopwords and punctuation), lowercased."""
    runs: list[list[str]] = []
    for chunk in re.split(r"[^\w\s'-]+", normalise(text)):
        run: list[str] = []
        for token in chunk.split():
            low = token.lower().strip("'-")
            low = low[:-2] if low.endswith("'s") else low
            ok = (
                3 <= len(low) <= 20
                and low not in STOPWORDS
                and not low.isdigit()
                and not has_cjk(low)
                and any(ch.isalpha() for ch in low)
                and not any(name.startswith(low) for name in names)
            )  # "Mel" for Melanie
            if ok:
                run.append(low)
                continue
            if run:
                runs.append(run)
            run = []
        if run:
            runs.append(run)
    return runs


def _overlaps(a: str, b: str) -> bool:
    """Shared words, also across a plural "s"."""

    def stem(w: str) -> str:
        return w[:-1] if w.endswith("s") and len(w) > 3 else w

    return bool({stem(w) for w in a.split()} & {stem(w) for w in b.split()})
