"""The offline extractor's later-wins rule: which offered earlier decision or preference a new one replaces.

Conservative by design, since a wrong link hides a decision that still stands while a missed link only
leaves two decisions current (as before): a new decision or preference links to an offered one only when
(1) the message that states it carries a change cue ("actually", "instead", "switch to", "I prefer",
"I'd rather", "changed my mind", ...) and (2) the two sentences, names and boilerplate removed, are close
in meaning: all-MiniLM-L6-v2 cosine at least :data:`REPLACE_SIMILARITY`. An explicit amendment ("Amendment
to the merge rule from last month: ...", "superseding keep-latest", "switch from X to Y") names
an earlier rule, so for it :data:`AMEND_SIMILARITY` is enough. Each offered item is replaced
at most once, by its closest new event. Measured on hand-made pairs: reversals of the same matter score
0.5-0.65 ("send updates by email" / "send updates to our Slack channel instead" 0.52, "use imperial units"
/ "I prefer metric units" 0.63), unrelated decisions 0.1-0.25; but "the Team plan" / "switch to the
Business plan" scores only 0.34 and is missed. A cue-less change ("Business plan from now on") is missed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from jobs.concepts import STANDING_TYPES
from jobs.embeddings import Embedder
from jobs.extract.rules.text import clip, normalise
from jobs.models import KeyEvent, Message, OpenItem

REPLACE_SIMILARITY = 0.45
# An explicit amendment names what it changes ("Amendment to the merge rule from last month", "superseding
# keep-latest", "switch from X to Y"; a bare "instead of" is only a change cue), so a looser match is enough:
# the two rules share their subject but differ in exactly the part that changed, which pulls their cosine down.
AMEND_SIMILARITY = 0.3
CHANGE_CUE = re.compile(
    r"\b(?:actually|instead|rather than|switch(?:ed|ing)? (?:to|over|back|from)|chang(?:e|ed|ing) (?:it |that )?to|"
    r"changed (?:my|our) minds?|on second thought|scratch that|no longer|not any ?more|from now on|"
    r"(?:i|we)(?: really| much| still)? prefer|(?:i|we)(?:'d| would)(?: much| really)? (?:rather|prefer))\b",
    re.IGNORECASE,
)
AMEND_CUE = re.compile(
    r"\b(?:amend(?:s|ed|ing|ment)?|supersed(?:e|es|ed|ing)|overrid(?:e|es|ing)|overrule[sd]?|revis(?:e|ed|ion)|"
    r"replac(?:e|es|ed|ing) (?:the|our|my|that|this|last|previous|earlier|keep-\w+)|"
    r"switch(?:ed|ing)? from|(?:previous|earlier|old|last (?:week|month)'s) (?:rule|decision|policy)|"
    r"(?:rule|decision|policy) from last (?:week|month|time))\b",
    re.IGNORECASE,
)
_BOILERPLATE = re.compile(
    r"\b(?:the user|the assistant|decided|prefers?|said|that|to|amendment|amended|superseding|supersedes|"
    r"rule from last (?:week|month))\b|^\W*decision\s*[:—–-]|[\"':]",
    re.IGNORECASE,
)


def core(what: str, names: set[str]) -> str:
    """What a decision is about, without who decided and the extractor's boilerplate."""
    text = what
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, " ")
    return clip(" ".join(_BOILERPLATE.sub(" ", text).split()) or what, 300)


def link_replacements(
    events: Sequence[KeyEvent], offered: Sequence[OpenItem], messages: Sequence[Message], embedder: Embedder
) -> list[KeyEvent]:
    """``events`` with ``replaces`` set where a new decision or preference clearly replaces an offered one."""
    items = [i for i in offered if i.standing]
    said = [[normalise(messages[i].content) for i in e.evidence if i < len(messages)] for e in events]
    amended = [any(AMEND_CUE.search(t) for t in texts) for texts in said]
    candidates = [
        k
        for k, e in enumerate(events)
        if e.type in STANDING_TYPES and (amended[k] or any(CHANGE_CUE.search(t) for t in said[k]))
    ]
    if not items or not candidates:
        return list(events)
    names = {m.name for m in messages if m.name}
    vectors = np.asarray(
        embedder.embed([core(events[k].what, names) for k in candidates] + [core(i.what, names) for i in items]),
        dtype=np.float32,
    )
    sims = vectors[: len(candidates)] @ vectors[len(candidates) :].T
    out = list(events)
    taken_items: set[int] = set()
    taken_events: set[int] = set()
    for flat in np.argsort(-sims, axis=None, kind="stable"):  # best pairs first, each side once
        row, col = divmod(int(flat), len(items))
        if sims[row, col] < AMEND_SIMILARITY:
            break
        if (
            row in taken_events
            or col in taken_items
            or sims[row, col] < (AMEND_SIMILARITY if amended[candidates[row]] else REPLACE_SIMILARITY)
        ):
            continue
        taken_events.add(row)
        taken_items.add(col)
        k = candidates[row]
        out[k] = out[k].model_copy(update={"replaces": items[col].event_id})
    return out
