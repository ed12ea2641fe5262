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
Business plan" scores only 0.34 and is missed.

Two weaker signals link only a close match. A rule that starts now ("From now on ...", "Going forward ...",
"... is now 25 MB") need not replace anything, so it needs :data:`NEW_RULE_SIMILARITY`. A decision restated
with other numbers and no cue at all ("... the gateway timeout to 8 seconds" after "... to 5 seconds") needs
:data:`RESTATE_SIMILARITY`. A stated fact with a cue ("The upload limit is now 25 MB (was 10 MB)") may replace a
decision too, and then is one. A session that opens by announcing an amendment ("Small tweak to the session
timeout we agreed on: ...") lends its cue to the decisions said after it, at :data:`REPLACE_SIMILARITY`; and a
short reply ("Make it 2 hours for everyone.") is matched together with the assistant's question it answers. The
phrasings were chosen on our own amendment sessions (tests/data/amendments/, tests/test_offline_amendments.py),
not on a benchmark's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jobs.concepts import STANDING_TYPES
from jobs.embeddings import Embedder
from jobs.extract.rules.records import by_name
from jobs.extract.rules.specifics import NUMBER
from jobs.extract.rules.text import clip, normalise, split_sentences
from jobs.extract.rules.values import value
from jobs.models import KeyEvent, Message, OpenItem

REPLACE_SIMILARITY = value("replace.similarity")  # the thresholds are data: rules/values.toml
# An explicit amendment names what it changes ("Amendment to the merge rule from last month", "superseding
# keep-latest", "switch from X to Y"; a bare "instead of" is only a change cue), so a looser match is enough:
# the two rules share their subject but differ in exactly the part that changed, which pulls their cosine down.
AMEND_SIMILARITY = value("replace.amend_similarity")
# A decision restated with other numbers and no cue at all ("Let's set the gateway timeout to 8 seconds" a month
# after "... to 5 seconds", 0.96) is the same rule changed; unrelated settings of one kind score far lower
# ("... the session cookie lifetime to 8 hours", 0.36).
RESTATE_SIMILARITY = value("replace.restate_similarity")
# "From now on, every lambda function logs in JSON" a month after "use Python 3.11 for the lambda functions" (0.48)
# is a new rule beside the old one; "From now on, the list endpoints cap the page size at 250" after "cap the page
# size of the list endpoints at 100" (0.87) replaces it.
NEW_RULE_SIMILARITY = value("replace.new_rule_similarity")
_EVENT_RULES = by_name("events")  # the cue tables are data: jobs/extract/rules/events.toml
CHANGE_CUE = _EVENT_RULES["CHANGE_CUE"].compiled  # "actually", "instead", "switch to", "raise ... to", "(was"
# A rule that starts now ("From now on, ...", "Going forward, ...", "... is now 25 MB") need not replace anything:
# it replaces an offered decision only when the two are about the same setting (:data:`NEW_RULE_SIMILARITY`).
NEW_RULE_CUE = _EVENT_RULES["NEW_RULE_CUE"].compiled
AMEND_CUE = _EVENT_RULES["AMEND_CUE"].compiled  # "amended", "superseding", "quick update on the ... rule"
_BOILERPLATE = _EVENT_RULES["BOILERPLATE"].compiled  # "the user decided to", "Decision:": events.toml


def core(what: str, names: set[str]) -> str:
    """What a decision is about, without who decided and the extractor's boilerplate."""
    text = what
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, " ")
    return clip(" ".join(_BOILERPLATE.sub(" ", text).split()) or what, 300)


def _specifics(text: str) -> set[str]:
    """The numbers of a decision ("5 seconds", "Node 18", "v2"): what a restatement changes."""
    return set(NUMBER.findall(text))


def _threshold(amended: bool, changed: bool, starts: bool) -> float:
    """The least similarity at which a candidate may replace an offered decision (one without any cue is a
    decision or preference: a fact is a candidate only with a cue)."""
    if amended:
        return AMEND_SIMILARITY
    if changed:
        return REPLACE_SIMILARITY
    if starts:
        return NEW_RULE_SIMILARITY
    return RESTATE_SIMILARITY


def _first_announcement(messages: Sequence[Message]) -> int:
    """The index of the session's first user message that announces an amendment (len(messages) if none)."""
    return next(
        (i for i, m in enumerate(messages) if m.role == "user" and AMEND_CUE.search(normalise(m.content))),
        len(messages),
    )


def _in_context(event: KeyEvent, messages: Sequence[Message]) -> str:
    """What the event says, with what names its subject when it is a short reply: the assistant's question it answers
    ("Make it 2 hours for everyone." after "How long should an idle admin session last?") and the assistant's reply
    that applied it ("Let's make it 30 days." -> "Changed the refresh token lifetime to 30 days."). The reply alone
    names too little to match."""
    first = min(event.evidence, default=0)
    if first >= len(messages) or len(event.what.split()) > 12:
        return event.what
    parts = [event.what]
    asked = normalise(messages[first - 1].content).rstrip() if first > 0 else ""
    if asked.endswith("?") and messages[first - 1].role == "assistant":
        parts.insert(0, asked)
    replies = [i for i in event.evidence if first < i < len(messages) and messages[i].role == "assistant"]
    if replies:
        parts += split_sentences(messages[replies[0]].content, max_sentences=1)
    return " ".join(parts)


def link_replacements(
    events: Sequence[KeyEvent], offered: Sequence[OpenItem], messages: Sequence[Message], embedder: Embedder
) -> list[KeyEvent]:
    """``events`` with ``replaces`` set where a new decision or preference clearly replaces an offered one.

    A stated fact with a change cue ("The upload limit is now 25 MB (was 10 MB)", "We no longer build on Node
    18; ...") that replaces an offered decision becomes a decision: it is the rule that holds now."""
    items = [i for i in offered if i.standing]
    said = [[normalise(messages[i].content) for i in e.evidence if i < len(messages)] for e in events]
    amended = [any(AMEND_CUE.search(t) for t in texts) for texts in said]
    # "Small tweak to the session timeout we agreed on: ..." opening the session, the rule itself said later: a
    # change of what the announcement names, not an amendment of its own (so the tighter threshold)
    announced = _first_announcement(messages)
    changed = [
        any(CHANGE_CUE.search(t) for t in texts) or announced < min(e.evidence, default=0)
        for e, texts in zip(events, said, strict=True)
    ]
    starts = [any(NEW_RULE_CUE.search(t) for t in texts) for texts in said]
    candidates = [
        k
        for k, e in enumerate(events)
        if e.type in STANDING_TYPES or (e.type == "fact" and (amended[k] or changed[k] or starts[k]))
    ]
    if not items or not candidates:
        return list(events)
    names = {m.name for m in messages if m.name}
    vectors = np.asarray(
        embedder.embed(
            [core(_in_context(events[k], messages), names) for k in candidates] + [core(i.what, names) for i in items]
        ),
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
        k = candidates[row]
        if row in taken_events or col in taken_items:
            continue
        if sims[row, col] < _threshold(amended[k], changed[k], starts[k]):
            continue
        if not (amended[k] or changed[k] or starts[k]) and _specifics(events[k].what) == _specifics(items[col].what):
            continue  # the same decision restated, nothing changed: it replaces nothing
        taken_events.add(row)
        taken_items.add(col)
        update: dict[str, object] = {"replaces": items[col].event_id}
        if events[k].type == "fact":
            update["type"] = "decision"
        out[k] = out[k].model_copy(update=update)
    return out
