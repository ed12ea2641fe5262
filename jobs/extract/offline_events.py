"""The offline extractor's key events: cue-phrase events per sentence (decisions with their objects, facts,
preferences, commitments, surprises), questions nobody answered, and an assistant's "Settled: ..." that the
user agreed to. Split from :mod:`jobs.extract.offline`, which scores the sentences this module reads."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import pairwise

from jobs.concepts import EventType
from jobs.extract.rules.agent import FAILURE
from jobs.extract.rules.applied import applied, echoed, specifics
from jobs.extract.rules.cues import (
    AGREEMENT,
    CHOICE_QUESTION,
    DECISION_LABEL,
    HEDGE,
    OFFER,
    PLEASANTRY,
    PROPOSAL,
    REFERS_BACK,
    SMALL_TALK_QUESTION,
    SUGGESTION,
    UNANSWERED,
    CueType,
    clause_from,
    cue,
    vetoed,
)
from jobs.extract.rules.dates import resolve_due
from jobs.extract.rules.records import by_name, word_list
from jobs.extract.rules.specifics import SPECIFIC, TECHNICAL
from jobs.extract.rules.text import clip, content_words, normalise, split_sentences, words
from jobs.extract.rules.values import value, value_map
from jobs.extract.rules.voice import INTERJECTION, attribute, decision_what, third_person
from jobs.models import KeyEvent, Message, Transcript

# Salience of an event by its type, for choosing the 20 kept; one weight per type of jobs.concepts.EVENT_TYPES
# (tests/test_concepts.py).
EVENT_WEIGHT: dict[str, float] = value_map("events.weight")  # rules/values.toml
_DUE = value("events.due")  # an event that names a due date
MAX_FACTS = 5  # facts kept per episode: the specifics a later session asks about, without crowding out the rest


@dataclass
class Sentence:
    text: str
    message: int  # index of the message in the transcript
    speaker: str  # for KeyEvent.who: Message.speaker, the role and a name beside it ("user (Dana)")
    label: str  # how the speaker is written in prose: "The user (Dana)", "The user"
    order: int  # global position
    score: float = 0.0
    centrality: float = 0.0  # cosine to the session's centroid; 0.0 unless the sentence was embedded
    narration: bool = False  # an agent's working step ("Let me check ..."): never an event, never summarised


# Words that name a role or an agent: a speaker's name holding one is never written alone in prose.
_ROLE_WORDS = frozenset(word_list("role_words"))  # rules/words.toml [role_words]


def prose_label(message: Message) -> str:
    """How the summary and events write a speaker as a subject: the host's name ("Dana") when it names no
    role or agent, else the role with the name beside it ("The user (system)"), so a name cannot make a
    user's words read as the assistant's or a system policy (issue 46 #4)."""
    speaker = message.speaker
    name = speaker[len(message.role) + 2 : -1] if speaker != message.role else ""
    if not name or set(re.findall(r"[a-z]+", name.casefold())) & _ROLE_WORDS:
        return f"The {speaker}"
    return name


@dataclass(frozen=True)
class _Session:
    """What every sentence's stages read about its session."""

    messages: list[Message]
    conversational: list[int]
    transcript: Transcript
    names: set[str]
    replies: dict[int, tuple[int, str]]  # user message -> the assistant's reply that applied it
    speakers_after: dict[int, int | None]
    opening: dict[int, int]  # each message's first sentence


@dataclass(frozen=True)
class _Found:
    """A sentence's event before rendering: its type, where its cue starts, and who it is credited to."""

    kind: EventType
    start: int
    who: str
    label: str
    evidence: list[int]
    labelled: bool = False


def find_events(
    sentences: list[Sentence], messages: list[Message], conversational: list[int], transcript: Transcript
) -> list[KeyEvent]:
    """Cue-phrase events, one per (type, message), most salient first, at most 20.

    Per sentence, in stages: candidates and vetoes (:func:`jobs.extract.rules.cues.cue`) -> agreement (an
    assistant's proposal or offer the user agreed to, an answer to a choice, a statement a reply applied) ->
    attribution (decisions, preferences and facts are the user's) -> rendering (:func:`_render`)."""
    opening: dict[int, int] = {}
    for s in sentences:
        opening.setdefault(s.message, s.order)
    session = _Session(
        messages,
        conversational,
        transcript,
        {w for m in messages if m.name for w in m.name.split()},
        _applying_replies(messages, conversational),
        _next_other_speaker(messages, conversational),
        opening,
    )
    best: dict[tuple[str, int, int], tuple[float, KeyEvent]] = {}  # (type, message, sentence of a fact)
    for s in sentences:
        found = _detect(s, session)
        if found is None:
            continue
        salience, event = _render(s, found, sentences, session)
        key = (found.kind, s.message, s.order if found.kind == "fact" else -1)  # every fact a message states
        if key not in best or salience > best[key][0]:
            best[key] = (salience, event)
    ranked = sorted(best.items(), key=lambda item: (-item[1][0], item[0][1], item[0][0]))
    facts = [key for key, _ in ranked if key[0] == "fact"][MAX_FACTS:]  # the least salient facts beyond the cap
    return [event for key, (_, event) in ranked if key not in facts][:20]


def _detect(s: Sentence, session: _Session) -> _Found | None:
    """The event ``s`` states, if any, credited to its speaker or to the user who agreed to it."""
    messages, conversational = session.messages, session.conversational
    message = messages[s.message]
    if message.role not in ("user", "assistant") or s.narration:
        return None  # an agent's working step is neither a commitment nor a decision
    text = normalise(s.text)
    if message.role == "user" and REFERS_BACK.match(text) and _follows_assistant(s.message, messages, conversational):
        return None  # "That's the rule going forward, yes.": the assistant's message it agrees to is the event
    mine = _Found("decision", 0, s.speaker, s.label, [s.message], bool(DECISION_LABEL.match(text)))
    found: _Found | None
    if message.role == "assistant":
        found = _agreed_to(s, text, mine, session)
    else:
        cued = cue(s.text, session.names)
        found = replace(mine, kind=cued[0], start=cued[1]) if cued else None
        if found is None and session.opening[s.message] == s.order and _answers_choice(s, messages, conversational):
            found = mine
        found = _applied(s, found, mine, session)
    if found is None and _is_open_question(s, messages, conversational, session.speakers_after):
        reply = session.speakers_after.get(s.message)  # the "not sure" answer is evidence too
        found = replace(mine, kind="open_question", evidence=[s.message] if reply is None else [s.message, reply])
    return found


def _agreed_to(s: Sentence, text: str, mine: _Found, session: _Session) -> _Found | None:
    """An assistant's sentence: a proposal or offer the user agreed to is the user's decision; of the assistant's own
    cues only commitments count, and surprises when a test or command failed unexpectedly (the agent sees it first);
    decisions, preferences and facts are the user's (an assistant "switched" a setting)."""
    messages, conversational = session.messages, session.conversational
    asked = text.rstrip().endswith("?")
    # "Should I raise the limit to 200 requests per minute?" -> "Yes, do that.": the user decided it
    offer = asked and OFFER.match(text) and SPECIFIC.search(text) and _substance(text, session.names) >= 3
    # "Settled: ..." (the user agreeing before or after), "I'd suggest ..." (the user agreeing after); a label or a
    # restatement ("Got it: ...") that closes a session right after the user stated terms
    proposal = (mine.labelled or PROPOSAL.match(text)) and not asked
    if offer or proposal:
        agreed = _agreement(s.message, messages, conversational, before=mine.labelled and not offer)
        if proposal and agreed is None and (mine.labelled or not SUGGESTION.match(text[:60])):
            agreed = _closing_terms(s.message, messages, conversational)
        if agreed is None:
            return None
        user = messages[agreed]
        return replace(mine, who=user.speaker, label=prose_label(user), evidence=[s.message, agreed])
    cued = cue(s.text, session.names)
    if cued is None or (cued[0] != "commitment" and not (cued[0] == "surprise" and FAILURE.search(s.text))):
        return None
    return replace(mine, kind=cued[0], start=cued[1])


def _applied(s: Sentence, found: _Found | None, mine: _Found, session: _Session) -> _Found | None:
    """A user's statement that the assistant's reply applied is a decision, however it was phrased ("The thumbnail
    worker should run with a concurrency of 4." -> "Set concurrency=4."); the reply is evidence too."""
    if found is not None and found.kind not in ("decision", "fact"):
        return found
    reply = _applied_by(s, session.replies, session.names)
    if reply is None:
        return found
    return replace(found if found and found.kind == "decision" else mine, evidence=[s.message, reply])


def _render(s: Sentence, found: _Found, sentences: list[Sentence], session: _Session) -> tuple[float, KeyEvent]:
    """The event as written (third person, its due date) and its salience."""
    due = None
    if found.kind == "open_question":
        question = clip(normalise(s.text).replace('"', "'"), 300)
        what = f'{s.label} asked "{question}", which was left unanswered.'
    else:
        # A labelled rule ("Settled: ...", "Amended rule, superseding ...: ...") runs to the end of its message;
        # so does an assistant's restatement the user agreed to ("To be explicit about the new contract: ...").
        whole = found.kind == "decision" and (found.labelled or found.label != s.label)
        stated = _rest_of_message(s, sentences) if whole else s
        what = _event_what(stated, found.kind, found.start, found.label)
        if found.kind == "commitment":
            transcript = session.transcript
            ref = session.messages[s.message].ts or transcript.ended_at or transcript.started_at
            due = resolve_due(normalise(s.text), ref.date()) if ref else None
    salience = round(EVENT_WEIGHT[found.kind] + s.score + (_DUE if due else 0.0), 5)
    return salience, KeyEvent(type=found.kind, what=what, evidence=found.evidence, who=found.who[:100], due=due)


def _agreement(index: int, messages: list[Message], conversational: list[int], before: bool) -> int | None:
    """The user's message after an assistant's message (or, ``before``, the one before it) that agrees with it; an
    agreement whose first sentence a veto strikes ("Yes, maybe next quarter.", "Okay, if it fits the budget.") is none."""
    pos = conversational.index(index)
    for j in conversational[pos + 1 : pos + 2] + (conversational[max(pos - 1, 0) : pos] if before else []):
        reply = normalise(messages[j].content[:200])
        if messages[j].role == "user" and AGREEMENT.match(reply) and not vetoed(_first_sentence(reply)):
            return j
    return None


def _first_sentence(text: str) -> str:
    return next(iter(split_sentences(text, max_sentences=1)), text)


def _substance(text: str, names: set[str]) -> int:
    """The content words of ``text`` and its numbers (a number is substance: "raise the cap to 500 MB")."""
    return len(content_words(text, exclude=names)) + len(re.findall(r"\d+", text))


def _answers_choice(s: Sentence, messages: list[Message], conversational: list[int]) -> bool:
    """``s``, the first sentence of its message, answers an assistant asking the user to choose ("How long should we
    keep the audit logs?" -> "Keep them for 90 days, then delete them."), and names a specific: the user's decision."""
    if not _follows_assistant(s.message, messages, conversational):
        return False
    text = normalise(s.text)
    if text.rstrip().endswith("?") or HEDGE.search(text) or UNANSWERED.search(text):
        return False
    if not (SPECIFIC.search(text) and _substance(text, set()) >= 3):
        return False
    asked = normalise(messages[conversational[conversational.index(s.message) - 1]].content).rstrip()
    last = re.split(r"(?<=[.!?])\s+", asked)[-1]
    return last.endswith("?") and bool(CHOICE_QUESTION.search(last))


def _applying_replies(messages: list[Message], conversational: list[int]) -> dict[int, tuple[int, str]]:
    """For each user message answered by an assistant's reply that applies or records something
    (:func:`jobs.extract.rules.applied.applied`), that reply's index and first 400 characters; once per session. A
    labelled rule or restatement ("Settled: ...") is left out: it is the decision itself, credited to the user
    who agreed (:func:`find_events`)."""
    out: dict[int, tuple[int, str]] = {}
    for i, j in pairwise(conversational):
        if messages[i].role != "user" or messages[j].role != "assistant":
            continue
        reply = normalise(messages[j].content[:400])
        if applied(reply) and not (DECISION_LABEL.match(reply) or PROPOSAL.match(reply)):
            out[i] = (j, reply)
    return out


def _applied_by(s: Sentence, replies: dict[int, tuple[int, str]], names: set[str]) -> int | None:
    """The assistant's reply (:func:`_applying_replies`) that applied or recorded what ``s`` states, echoing a
    specific of it, else None: the user's sentence was a decision, however it was phrased. Only a sentence about a
    system counts: technical (:data:`TECHNICAL`), not about the speaker ("I ran a 5K ..."), not a task asked of the
    agent, not a problem report, not a question, not hedged."""
    if s.message not in replies:
        return None
    index, reply = replies[s.message]
    text = normalise(s.text)
    if text.rstrip().endswith("?") or HEDGE.search(text) or _NOT_ABOUT_A_SYSTEM.match(text) or _PROBLEM.search(text):
        return None
    substance = _substance(text, names)
    if not ((TECHNICAL.search(text) or specifics(text)) and substance >= 1 and echoed(text, reply)):
        return None
    # a short reply ("Let's make it 30 days.") counts with the words of the reply that applied it
    return index if substance + _substance(reply[:200], names) >= 4 else None


# Not a statement about a system: the speaker's own life ("I ran a 10K ...") or a task asked of the agent ("Fix the
# failing test in tests/test_api.py", "Read src/app.py and explain the startup"), which the reply echoes too.
_NOT_ABOUT_A_SYSTEM = by_name("events")["NOT_ABOUT_A_SYSTEM"].compiled  # jobs/extract/rules/events.toml


# A problem report ("The build is broken since we bumped Node to 22."), which a reply also echoes: no setting.
_PROBLEM = by_name("events")["PROBLEM"].compiled  # jobs/extract/rules/events.toml


def _follows_assistant(index: int, messages: list[Message], conversational: list[int]) -> bool:
    """The message right before this one (in the conversation) is an assistant's."""
    pos = conversational.index(index)
    return pos > 0 and messages[conversational[pos - 1]].role == "assistant"


def _closing_terms(index: int, messages: list[Message], conversational: list[int]) -> int | None:
    """An assistant's labelled rule that closes the session, nobody objecting, right after a user message that
    states terms rather than asks ("Four attempts total, and cap the backoff at 60 seconds." -> "Settled: ..."):
    that user message, else None. A label that only answers a question settles nothing."""
    pos = conversational.index(index)
    if pos != len(conversational) - 1 or pos == 0:
        return None
    before = conversational[pos - 1]
    user = messages[before]
    return before if user.role == "user" and not normalise(user.content).rstrip().endswith("?") else None


def _rest_of_message(s: Sentence, sentences: list[Sentence]) -> Sentence:
    """``s`` with the sentences after it in the same message appended: a labelled rule states all of them."""
    rest = [x.text for x in sentences if x.message == s.message and x.order > s.order and not x.narration]
    return replace(s, text=" ".join([s.text, *rest])) if rest else s


def _event_what(s: Sentence, kind: CueType, start: int, label: str) -> str:
    """The event as a third-person sentence. A decision keeps its object verbatim ("Let's use PostgreSQL 17 for
    the billing service" -> "The user decided to use PostgreSQL 17 for the billing service"); a fact is the
    whole sentence (its specifics); otherwise the cue's own clause if it rewrites cleanly ("I joined a gym" inside
    a longer sentence), else the whole sentence rewritten, else the sentence quoted. ``label`` names who the
    event is credited to (the user who agreed to an assistant's "Settled: ...")."""
    if label != s.label:  # an assistant's rule the user agreed to: the rule, quoted without its lead-in
        body = OFFER.sub("", PROPOSAL.sub("", normalise(s.text), count=1), count=1).strip()
        body = body[:-1] + "." if body.endswith("?") else body
        if not DECISION_LABEL.match(body) and body != normalise(s.text).strip():
            return (
                clip(f'{label} decided: "{body[0].upper() + body[1:]}"'.replace(chr(34) * 2, chr(34)), 400)
                if body
                else attribute(s.text, label, "decided")
            )
    clause = clause_from(s.text, start)
    what = None
    lead = INTERJECTION.sub("", normalise(s.text)[:start])
    # "I'm walking back the GraphQL call for the partner API: partners want plain REST": a clause that leaves the
    # sentence's specifics behind is not the event; the whole sentence is
    after = normalise(s.text)[start:].strip()[len(clause) :]
    whole = bool({m.group() for m in SPECIFIC.finditer(after)} - {m.group() for m in SPECIFIC.finditer(clause)})
    if kind == "decision" and not whole and label == s.label and not content_words(lead):  # nothing said before the cue
        what = decision_what(clause, s.label)
    if (
        what is None
        and not whole
        and kind != "fact"
        and label == s.label
        and len(clause.split()) >= 4
        and re.match(r"I\b|I'", clause)
    ):
        what = third_person(clause, s.label)
    if what is None:
        verb = {
            "decision": "decided",
            "preference": "said",
            "commitment": "committed",
            "surprise": "was surprised",
            "fact": "said",
        }[kind]
        what = attribute(s.text, label, verb)
    what = what.rstrip(":;,- ")
    return clip(what if re.search(r"[.!?…\"]$", what) else what + ".", 400)


def _next_other_speaker(messages: list[Message], conversational: list[int]) -> dict[int, int | None]:
    """For each message, the index of the next message by someone else (None if nobody spoke after)."""
    # One pass from the end (issue 46 #8: a scan ahead per message was quadratic in a one-speaker run).
    out: dict[int, int | None] = {}
    following: int | None = None  # the next message by someone other than the one after this position
    later: tuple[int, str] | None = None  # the message after this position and its speaker
    for i in reversed(conversational):
        speaker = messages[i].speaker
        if later is not None and later[1] != speaker:
            following = later[0]
        out[i] = following
        later = (i, speaker)
    return out


def _is_open_question(
    s: Sentence, messages: list[Message], conversational: list[int], next_other: dict[int, int | None]
) -> bool:
    """A real question nobody answered: the session ended, or the reply admits not knowing. Conservative:
    small talk ("how are you?") and short questions never count."""
    text = normalise(s.text).strip()
    if not text.endswith("?") or len(words(text)) < 4:
        return False
    if SMALL_TALK_QUESTION.search(text) or PLEASANTRY.search(text):
        return False
    reply = next_other.get(s.message)
    if reply is None:  # nobody spoke after it; a one-speaker session of several messages is not a dialogue
        return len({messages[i].speaker for i in conversational}) > 1 or len(conversational) == 1
    return bool(UNANSWERED.search(normalise(messages[reply].content[:300])))
