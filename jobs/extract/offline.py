"""The offline extractor: an episode from rules plus local embeddings, with no network and no API key.

It is the default when no Anthropic key is configured, so the system runs end to end anywhere. It is
honestly lower quality than Claude: the summary is a lead ("who talked about what") plus a few salient
sentences of the transcript turned into the third person (or quoted), tags are frequent noun phrases
(:mod:`jobs.extract.rules.topics`), key events come from cue phrases ("let's use X for Y", "we'll go with",
"I prefer", "I'll send ... by Friday", "we're on Django 4.2", a question nobody answered, an assistant's
"Settled: ..." that the user agreed to) with their specifics verbatim (:mod:`jobs.extract.offline_events`),
and entities from capitalisation.
A new decision or preference replaces an offered earlier one only with a change cue and a close meaning
(:mod:`jobs.extract.replacements`). Output is deterministic: the same transcript always yields the same episode, and every result is labelled
``model="offline"`` so nobody mistakes it for a model's.

How sentences are scored: the lexically most promising ones are embedded once (all-MiniLM-L6-v2, within
a word budget, in two length-sorted batches); a sentence's *centrality* is its cosine to the mean of
those vectors, i.e. how much it is about what the session is about. Rule bonuses (names, numbers, a
speaker stating a fact or plan) and penalties (greetings, praise, questions, fragments) are added; see
:func:`jobs.extract.rules.salience.lexical_score`. Summary, tags and event order all reuse these scores.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from jobs.concepts import EventType
from jobs.embeddings import Embedder, get_embedder
from jobs.extract.offline_events import Sentence, find_events, prose_label
from jobs.extract.replacements import link_replacements
from jobs.extract.rules.agent import clean_said, code_names, is_narration, is_tool_text
from jobs.extract.rules.cues import HEDGE
from jobs.extract.rules.entities import find_entities
from jobs.extract.rules.records import by_name
from jobs.extract.rules.salience import key_phrases, lexical_score, tfidf_centrality
from jobs.extract.rules.text import (
    clip,
    content_words,
    looks_english,
    normalise,
    shouting,
    split_sentences,
)
from jobs.extract.rules.values import count, value, value_map
from jobs.extract.rules.voice import attribute
from jobs.models import (
    MAX_OPEN_ITEMS,
    Entity,
    EpisodeExtraction,
    ExtractionResult,
    KeyEvent,
    Message,
    OpenItem,
    Resolution,
    Transcript,
)

# Work caps, so a 500-message transcript costs a bounded amount. Embedding is nearly all of the time
# (0.3-0.5 ms per token on one busy CPU core), so only the lexically most promising sentences are
# embedded, within a word budget. LoCoMo summary cosine by budget: 160 words 0.776, 320 words 0.790,
# 400 words 0.795, every sentence 0.799 (at ~2.5x the CPU of 320).
MAX_MESSAGE_CHARS = 6000
MAX_SENTENCES_PER_MESSAGE = 30
MAX_EMBEDDED = 48  # sentences embedded per transcript; the rest keep their lexical score only
EMBED_WORDS = 24  # a sentence's first words are enough to place it
EMBED_BUDGET = 320  # words embedded per transcript in all
TFIDF_WEIGHT = value("offline.tfidf_weight")  # cheap lexical centrality, used to choose what to embed (values.toml)
SUMMARY_CHARS = 800
# A later sentence this close to an open item (and saying it is done / not asking again) resolves it; one
# per type of OPEN_ITEM_TYPES.
RESOLVE_SIMILARITY: dict[str, float] = value_map("offline.resolve_similarity")
LEAD_TYPES: tuple[EventType, ...] = ("decision",)  # an event of these types opens the summary (see _summary)
NARRATION_PENALTY = value("offline.narration_penalty")  # an agent's working step ranks below the talk about the work
# The summary: a bonus for a speaker not yet heard from, the cosine above which two sentences say the same, the share
# of a sentence's words the leading decision holds when it restates it (rules/values.toml summary.*).
_NEW_SPEAKER, _SAME_COSINE = value("summary.new_speaker"), value("summary.same_cosine")
_RESTATES_SHARE = value("summary.restates_share")
_DONE = by_name("agent")["DONE"].compiled  # jobs/extract/rules/agent.toml: a later mention that settles an item
_STILL_OPEN = by_name("agent")["STILL_OPEN"].compiled  # ... and one that keeps it open


@dataclass(frozen=True, eq=False)
class Embedded:
    """A sentence that was embedded, with its unit vector. Only these can enter the summary or settle
    an open item; the rest were ranked out before embedding and keep their lexical score."""

    sentence: Sentence
    vector: np.ndarray


class OfflineExtractor:
    """Deterministic rule- and embedding-based extractor (see the module docstring for the method)."""

    name = "offline"
    # 2: preferences, and later decisions replace earlier ones; 3: agent sessions (no working narration as
    # commitments, tool context never quoted or tagged, files and commands as entities); 4: decisions with their
    # objects verbatim, facts, noun-phrase topics, no note-taking as commitments, amendments link (issue 36); 5: a
    # rule written down as a session's last word after the user's terms is a decision, a labelled rule keeps its
    # whole message, a reply pointing back ("That's the rule going forward") is no event of its own; 6: amendments in
    # more phrasings ("Change of plan: ...", "X is deprecated; use Y", "The limit is now N (was M)", a decision
    # restated with other numbers) and "let's <change a system>" decisions link to what they replace
    prompt_version = "offline-7"

    def __init__(self, embedder: Embedder | None = None, *, embed_budget: int = EMBED_BUDGET) -> None:
        """``embed_budget``: words embedded per transcript, the speed/quality knob (see EMBED_BUDGET)."""
        self._embedder = embedder
        self.embed_budget = max(EMBED_WORDS, embed_budget)

    @property
    def embedder(self) -> Embedder:
        """Loaded on first use: constructing an extractor must stay cheap (the CLI builds one eagerly)."""
        if self._embedder is None:
            self._embedder = get_embedder("minilm")
        return self._embedder

    def extract(self, transcript: Transcript, open_items: list[OpenItem] | None = None) -> ExtractionResult:
        """Build one validated episode. Stateless, so one instance can serve many threads."""
        messages = transcript.messages
        said = [_said(m) for m in messages]
        conversational = [i for i, m in enumerate(messages) if m.role in ("user", "assistant") and said[i].strip()]
        used = conversational or [i for i, m in enumerate(messages) if m.role == "system" and said[i].strip()]
        sentences = _sentences(messages, said, used, transcript)
        embedded = self._score(sentences)
        events = find_events(sentences, messages, conversational, transcript)
        entities = _entities(sentences, messages, said)
        names = [m.name for m in messages if m.name]
        tags = key_phrases([(s.text, s.centrality) for s in sentences], names)
        extraction = EpisodeExtraction(
            summary=_summary(sentences, embedded, messages, transcript, tags, events),
            topic_tags=tags,
            key_events=link_replacements(events, open_items or [], messages, self.embedder),
            entities=entities,
            resolved_items=self._resolutions(open_items or [], embedded, messages),
            importance=_importance(events, len(used), len(entities)),
        )
        extraction = EpisodeExtraction.model_validate(extraction.model_dump())
        return ExtractionResult(extraction=extraction, model="offline", prompt_version=self.prompt_version, calls=[])

    def close(self) -> None:
        """Nothing to release: the extractor holds no connection, and the embedder is shared."""

    def _score(self, sentences: list[Sentence]) -> list[Embedded]:
        """Set each sentence's centrality and score (embeddings plus rule bonuses; see the module
        docstring) and return the sentences that were embedded, in transcript order."""
        if not sentences:
            return []
        texts = [s.text for s in sentences]
        lexical_central = tfidf_centrality(texts)
        prescore = [
            lexical_score(s.text, s.speaker.partition(" ")[0] == "assistant")
            + TFIDF_WEIGHT * c
            - (NARRATION_PENALTY if s.narration else 0.0)
            for s, c in zip(sentences, lexical_central, strict=True)
        ]
        chosen: list[Sentence] = []
        budget = self.embed_budget
        for s in sorted(sentences, key=lambda s: (-prescore[s.order], s.order)):
            n_words = min(len(s.text.split()), EMBED_WORDS)
            if len(chosen) == MAX_EMBEDDED or (chosen and n_words > budget):
                break
            chosen.append(s)
            budget -= n_words
        chosen.sort(key=lambda s: s.order)
        vectors = self._embed([" ".join(s.text.split()[:EMBED_WORDS]) for s in chosen])
        centroid = vectors.mean(axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-9)
        embedded = [Embedded(s, v) for s, v in zip(chosen, vectors, strict=True)]
        for e in embedded:
            e.sentence.centrality = round(float(e.vector @ centroid), 5)  # rounded: float noise must not reorder ties
        floor = min(s.centrality for s in chosen)
        was_embedded = {s.order for s in chosen}
        for s in sentences:
            s.score = round((s.centrality if s.order in was_embedded else floor) + prescore[s.order], 5)
        return embedded

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Embed in two calls, short texts and long ones: a batch is padded to its longest text, and
        one mixed batch of chat sentences costs ~1.35x the CPU of two length-sorted ones."""
        if len(texts) < 12:
            return np.asarray(self.embedder.embed(texts), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
        parts = [order[: len(order) // 2], order[len(order) // 2 :]]
        chunks = [np.asarray(self.embedder.embed([texts[i] for i in part]), dtype=np.float32) for part in parts]
        out = np.empty((len(texts), chunks[0].shape[1]), dtype=np.float32)
        for part, chunk in zip(parts, chunks, strict=True):
            out[part] = chunk
        return out

    def _resolutions(
        self, items: list[OpenItem], embedded: list[Embedded], messages: list[Message]
    ) -> list[Resolution]:
        """Earlier open items this session settles, conservatively: a sentence close in meaning to the
        item that reports it done (commitments) or states an answer without asking again (questions)."""
        items = [i for i in items if i.type in RESOLVE_SIMILARITY][:MAX_OPEN_ITEMS]
        candidates = [e for e in embedded if messages[e.sentence.message].role != "system"]
        if not items or not candidates:
            return []
        matrix = np.stack([e.vector for e in candidates])
        names = {m.name for m in messages if m.name}
        item_vectors = self.embedder.embed([_item_core(i.what, names) for i in items])
        out = []
        for item, vector in zip(items, item_vectors, strict=True):
            sims = matrix @ vector
            for k in np.argsort(-sims, kind="stable"):
                sentence = candidates[k].sentence
                text = normalise(sentence.text)
                if sims[k] < RESOLVE_SIMILARITY[item.type]:
                    break
                if text.rstrip().endswith("?") or _STILL_OPEN.search(text) or HEDGE.search(text):
                    continue
                if item.type == "commitment" and not _DONE.search(text):
                    continue
                out.append(
                    Resolution(
                        item_id=item.event_id,
                        outcome="fulfilled" if item.type == "commitment" else "answered",
                        evidence=[sentence.message],
                    )
                )
                break
        return out


def _item_core(what: str, names: set[str]) -> str:
    """What an open item is about, without who or boilerplate: a shared name alone would otherwise
    make "Thanks Dana, got it." look like the answer to anything Dana asked."""
    quoted = re.search(r'"([^"]{3,})"', what)
    core = quoted.group(1) if quoted else what
    for name in sorted(names, key=len, reverse=True):
        core = core.replace(name, " ")
    core = re.sub(r"\b(?:the user|the assistant)\b|, which was left unanswered\.?", " ", core, flags=re.IGNORECASE)
    return clip(" ".join(core.split()) or what, 300)


def _said(message: Message) -> str:
    """What a message's speaker said, as the extractor reads it: tool messages (and tool traffic flattened
    into a user or assistant message) are context only, host markup and notices are nobody's words
    (:mod:`jobs.extract.rules.agent`)."""
    if message.role == "tool" or is_tool_text(message.content):
        return ""
    return clean_said(message.content)


def _sentences(messages: list[Message], said: list[str], used: list[int], transcript: Transcript) -> list[Sentence]:
    out: list[Sentence] = []
    for i in used:
        message = messages[i]
        speaker = message.speaker  # the role, a name only beside it (issue 46 #4)
        label = prose_label(message)
        ref = message.ts or transcript.ended_at or transcript.started_at
        for text in split_sentences(said[i][:MAX_MESSAGE_CHARS], MAX_SENTENCES_PER_MESSAGE):
            narration = message.role == "assistant" and is_narration(normalise(text), ref.date() if ref else None)
            out.append(Sentence(text, i, speaker, label, len(out), narration=narration))
    return out


# -- summary -------------------------------------------------------------------------------------


def _summary(
    sentences: list[Sentence],
    embedded: list[Embedded],
    messages: list[Message],
    transcript: Transcript,
    tags: list[str],
    events: list[KeyEvent],
) -> str:
    """The session's last decision when it has one and who talked about what, in one dated sentence, then 2-3
    salient, non-redundant sentences in original order, third person. The decision comes first because a block
    that has room for one sentence of a recent session shows the first one: "the user decided to use PostgreSQL
    17 for the billing service" carries what the next session needs; "talked about billing service" does not.
    One sentence, because a block quoting the sentence that best matches a question keeps its date with it."""
    date = transcript.started_at or transcript.ended_at
    prefix = f"On {date.day} {date:%B %Y}, " if date else ""
    lead = _lead(sentences, tags)
    # the session's last decision: what it settled on, later in the session, after the talk that led to it
    first = max((e for e in events if e.type in LEAD_TYPES), key=lambda e: min(e.evidence, default=0), default=None)
    if first is not None:  # one sentence, so the date stays with both: "On 4 March, Dana decided to ...; Dana and ..."
        decided = first.what.rstrip().removesuffix(".")
        lead = (
            f"{decided}; {lead[0].lower() + lead[1:] if lead.startswith('The ') else lead}" if lead else decided + "."
        )
    ranked = sorted(embedded, key=lambda e: (-e.sentence.score, e.sentence.order))
    want = 1 if len(ranked) < 3 else 2 if len(ranked) < 8 else 3
    picked: list[Embedded] = []
    covered: set[str] = set()
    while ranked and len(picked) < want:  # best first, a small bonus for a speaker not yet heard from
        best = max(
            ranked,
            key=lambda e: (
                e.sentence.score + (_NEW_SPEAKER if e.sentence.speaker not in covered else 0.0),
                -e.sentence.order,
            ),
        )
        ranked.remove(best)
        if best.sentence.narration:
            continue  # "Let me check the project structure." says nothing about the session
        if any(float(best.vector @ p.vector) > _SAME_COSINE for p in picked):
            continue  # says the same as one already picked
        if first is not None and best.sentence.message in first.evidence and _restates(best.sentence.text, first.what):
            continue  # the decision that leads the summary already says it
        picked.append(best)
        covered.add(best.sentence.speaker)
    parts = [lead] if lead else []
    length = len(prefix) + len(lead)
    for s in sorted((e.sentence for e in picked), key=lambda s: s.order):
        part = clip(attribute(s.text, s.label), 300).rstrip(":;,- ")
        part += "" if re.search(r"[.!?…\"]$", part) else "."
        if parts and length + len(part) + 1 > SUMMARY_CHARS:
            break
        parts.append(part)
        length += len(part) + 1
    if not parts and not sentences and any(m.role == "tool" or is_tool_text(m.content) for m in messages):
        calls = _TOOL_NAME.findall("\n".join(m.content for m in messages))
        tools = _join(list(dict.fromkeys(calls))[:5])
        parts = [
            f"A session of {len(messages)} message(s) with no conversation, only tool activity"
            + (f" ({tools})." if tools else ".")
        ]
    if not parts:
        who = _join(list(dict.fromkeys(f"the {m.speaker}" for m in messages))) or "nobody"
        parts = [f"A session of {len(messages)} message(s) from {who} with no substantive text."]
    text = " ".join(parts)
    if prefix and text.startswith(("The user", "The assistant", "The system", "The tool", "A session")):
        text = text[0].lower() + text[1:]
    return clip(prefix + text, 1200)


def _restates(sentence: str, what: str) -> bool:
    """Most of the sentence's content words are in ``what`` (an event made from it)."""
    said = set(content_words(sentence))
    return bool(said) and len(said & set(content_words(what))) >= _RESTATES_SHARE * len(said)


_TOOL_NAME = re.compile(r"^\[tool (?:call|result|error) ([\w.-]{1,40})", re.MULTILINE)


def _lead(sentences: list[Sentence], tags: list[str]) -> str:
    """ "Dana and the assistant talked about a, b and c." Names the participants and the topics."""
    labels = list(dict.fromkeys(s.label for s in sentences))
    if not labels or not tags:
        return ""
    names = [labels[0]] + [lab[0].lower() + lab[1:] if lab.startswith("The ") else lab for lab in labels[1:4]]
    return f"{_join(names)} talked about {_join(tags[:3])}."


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""


# -- entities and importance ---------------------------------------------------------------------


def _entities(sentences: list[Sentence], messages: list[Message], said: list[str]) -> list[Entity]:
    """Speakers, then names found in the text, then the files and commands the user or the assistant
    named (never those only a tool's output mentions). Each must occur in the transcript as written
    (the pipeline drops any that don't), so a name found in normalised text is mapped back to its
    spelling."""
    haystack = "\n".join(f"{m.name or ''}\n{m.content}" for m in messages)
    speakers = list(dict.fromkeys(m.name for m in messages if m.name and m.name.strip()))
    english = [
        s.text for s in sentences if looks_english(s.text) and not shouting(s.text) and s.text.count("|") < 2
    ]  # a markdown table row is cells, not prose
    out: dict[str, Entity] = {}
    for name in speakers:
        out.setdefault(name.strip()[:120], Entity(name=name.strip()[:120], kind="person"))
    for hit in find_entities(english, speakers):
        for spelling in (hit.name, hit.name.replace("'", "’")):
            if spelling in haystack and spelling not in out and normalise(spelling) not in out:
                out[spelling] = Entity(name=spelling, kind=hit.kind)
                break
    for i, m in enumerate(messages):
        if m.role not in ("user", "assistant") or not said[i]:
            continue
        for name, kind in code_names(said[i]):
            if len(out) < 30 and name not in out and name in haystack:
                out[name] = Entity(name=name[:120], kind="product" if kind == "product" else "other")
    return list(out.values())[:30]


def _importance(events: list[KeyEvent], n_messages: int, n_entities: int) -> float:
    """More decisions and commitments, denser in the session, mean the episode matters more later."""
    counts: Counter[str] = Counter(e.type for e in events)
    raw = _IMPORTANCE["base"]  # the weights are data: rules/values.toml importance.*
    for kind, weight in _PER_EVENT.items():  # in the order the records list them
        raw += weight * min(counts[kind], _EVENTS_COUNTED)
    raw += _IMPORTANCE["density"] * min(1.0, 2 * len(events) / max(n_messages, 1))
    raw += _IMPORTANCE["per_entity"] * min(n_entities, _ENTITIES_COUNTED)
    return round(min(_IMPORTANCE["ceiling"], max(_IMPORTANCE["floor"], raw)), 2)


_IMPORTANCE = {k: value(f"importance.{k}") for k in ("base", "density", "per_entity", "floor", "ceiling")}
_PER_EVENT = value_map("importance.per_event")  # decision, commitment, open_question, surprise
_EVENTS_COUNTED, _ENTITIES_COUNTED = count("importance.events_counted"), count("importance.entities_counted")
