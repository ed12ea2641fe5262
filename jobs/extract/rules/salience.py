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
from jobs.extract.rules.values import count, value, value_map

_SELF_STATEMENT = re.compile(r"^\W*(?:\w+,\s*)?(?:I|I'm|I've|I'll|We|We'll|We're|My)\b")


# The weights are data (rules/values.toml, each with what it weighs and where it came from).
_PER_WORD, _WORDS_COUNTED = value("salience.per_content_word"), count("salience.content_words_counted")
_A_NAME, _NUMBER, _SELF = value("salience.capitalised"), value("salience.number"), value("salience.self_statement")
_DECIDED, _WORK_DONE = value("salience.decision_or_commitment"), value("salience.work_done")
_PRAISE, _PRAISE_WORDS = value("salience.generic_praise"), count("salience.praise_content_words")
_SECOND_PERSON, _ANNOTATION = value("salience.second_person"), value("salience.annotation")
_CODE_OR_URL, _PLEASANTRY, _QUESTION = (
    value("salience.code_or_url"),
    value("salience.pleasantry"),
    value("salience.question"),
)
_SHORT, _SHORT_WORDS = value("salience.short"), count("salience.short_words")
_LONG, _LONG_WORDS = value("salience.long"), count("salience.long_words")


def lexical_score(text: str, by_assistant: bool) -> float:
    """Rule bonuses and penalties added to a sentence's centrality. Why each: specific sentences (names,
    numbers, content words, a speaker's own facts and plans) make summaries; greetings, praise, questions,
    fragments and photo captions do not."""
    n_words = len(words(text))
    informative = len(content_words(re.sub(r"\[[^\]]*\]", " ", text)))
    found = cue(text)
    score = _PER_WORD * min(informative, _WORDS_COUNTED)
    score += _A_NAME if CAPITALISED.search(text) else 0.0
    score += _NUMBER if has_number(text) else 0.0
    score += _SELF if not by_assistant and _SELF_STATEMENT.match(text) else 0.0
    score += _DECIDED if found and found[0] in ("decision", "commitment") else 0.0
    score += _WORK_DONE if by_assistant and WORK_DONE.match(text) else 0.0  # what the session achieved
    score += _PRAISE if GENERIC_PRAISE.search(text) and informative <= _PRAISE_WORDS else 0.0
    score += _SECOND_PERSON if SECOND_PERSON.search(text) else 0.0  # mostly reactions to the other speaker
    score += _ANNOTATION if text.lstrip().startswith("[") else 0.0  # an annotation such as a photo caption
    score += _CODE_OR_URL if re.search(r"https?://|\w+\(\)|[{}<>=]{1}\S*[{}<>=]", text) else 0.0  # reads badly
    score += _SHORT if n_words < _SHORT_WORDS else _LONG if n_words > _LONG_WORDS else 0.0
    score += _PLEASANTRY if PLEASANTRY.search(text) else 0.0
    score += _QUESTION if text.rstrip().endswith("?") else 0.0
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


_TOPIC_BASE, _PROPER_BOOST = value("topics.base_weight"), value("topics.proper_boost")
_LENGTH_WEIGHT = tuple(value_map("topics.length_weight")[n] for n in ("one", "two", "three"))  # by words in a phrase


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
        weight = _TOPIC_BASE + max(centrality, 0.0)
        for run in _runs(text, lowered):
            heads.add(run[-1])
            for n in (1, 2, 3):
                for k in range(len(run) - n + 1):
                    phrase = " ".join(run[k : k + n])
                    tf[phrase] += 1
                    boost = _PROPER_BOOST if any(w in proper for w in run[k : k + n]) else 1.0
                    score[phrase] += weight * boost * _LENGTH_WEIGHT[n - 1]
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
