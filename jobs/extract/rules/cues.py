"""Event cues: the phrases that make a sentence a decision, a preference, a commitment or a surprise, and the chat
patterns (pleasantries, small talk, praise, hedges, "not sure" replies) that make it none."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from jobs.extract.rules.dates import resolve_due
from jobs.extract.rules.text import content_words, normalise

# The event types a cue can suggest; an open question is found from the dialogue, not from a cue.
CueType = Literal["decision", "preference", "commitment", "surprise", "fact"]

PLEASANTRY = re.compile(
    r"^\W*(?:hey|hi|hello|thanks|thank you|bye|good ?bye|see you|talk (?:to you )?soon|take care|"
    r"good to see|nice to|glad to|have a (?:great|good|nice)|you're welcome|no problem|sounds good|"
    r"same here|me too|of course|congrat)",
    re.IGNORECASE,
)

# "Decision: ...", "Settled: ...", "Settled then: ...", "Amended rule: ...", "Amended rule, superseding keep-latest:
# ...", "Amendment to the merge rule from last month: ...", "Rule change: ...", "Decision recorded: ...", "Going
# forward: ...": a decision stated as a label (the user's own, or an assistant's that the user agrees to). A rule's
# label may carry a short qualifier before its colon when an adjective says it is a new one ("Revised policy,
# replacing the old one: ..."); "The policy we had is fine: ..." is prose.
_RULE_NOUN = r"(?:rule|policy|decision|convention|contract)"
DECISION_LABEL = re.compile(
    r"^\W*(?:(?:decision(?: then| made)?)\s*[:—–-]|(?:(?:decided|settled|agreed|locked(?: in)?)(?:,? then| on| it| that)?|"
    r"(?:revers(?:ing|ed)|revisiting|walking back|rolling back) (?:the|our|my|that|this) [^:]{1,60}|"
    # "Amending the rule, superseding the old subtract-all behaviour:", "Revising the cache policy:"
    r"(?:amend|revis|updat|chang|correct|replac|supersed)ing (?:the|our|my|that|this) (?:[\w-]+ ){0,3}"
    + _RULE_NOUN
    + r"(?:,? [^:]{1,80})?|"
    r"(?:(?:now that|since|as|because) [^:,]{1,60},\s*)?the (?:[\w-]+ ){0,3}" + _RULE_NOUN + r" "
    r"(?:changes|is changing|has changed|now reads)|"
    r"final(?: (?:call|answer))?|"
    r"(?:new|amended|updated|revised|corrected|final|replacement) (?:" + _RULE_NOUN + r"|call|answer)"
    r"(?: in full)?(?:,? [^:.!?\n]{1,60})?|"
    r"(?:(?:the|here's the|so the) )?(?:(?:amended|updated|revised|new|final) )?"
    + _RULE_NOUN
    + r"(?: (?:change|update|"
    r"in full|recorded))?|(?:change|rule|policy) recorded|(?:recording|summary of) the " + _RULE_NOUN + r"|"
    r"correction|revision|override|effective (?:immediately|now|today)|(?:going|moving) forward|from now on|"
    r"amendment(?: to [^:]{1,80})?|change of plans?|(?:update|change|correction) to (?:the|our|my) [^:]{1,60})\s*:)"
    r"\s*(.{3,})",
    re.IGNORECASE,
)
_ADV = r"(?: (?:just|also|finally|already|really|definitely|probably|actually|officially|recently|now))?+"
STRONG_DECISION = re.compile(
    r"\b(?:(?:we|i)(?:'ll| will|'re going to| are going to|'m going to| am going to)? go(?:ing)? with|"
    r"(?:i|we)(?:'ve| have)?" + _ADV + r" (?:decided|chosen|chose|picked|opted|settled on|committed to)|"
    r"decided to|we(?:'ve| have)?" + _ADV + r" agreed(?!\s*(?:on|upon)?\s*[:,.;—–-])|"
    r"(?:i|we)(?:'m|'re| am| are)(?: now)? (?:walking back|reversing|rolling back|scrapping|ditching|dropping) "
    r"(?:the|our|my|that|this) [^.;:!?]{0,60}?\b(?:call|decision|rule|policy|choice|convention|plan)\b|agreed to|settled on|opted for|made up my mind|"
    r"(?:i|we)(?:'ll| will) take the|(?:i|we)(?:'m|'re| am| are) switching (?:to|from|over)|"
    r"(?:i|we)(?:'ve| have)?" + _ADV + r" (?:signed up|registered|enrolled|subscribed|joined|applied|adopted|"
    r"booked|started|bought|purchased|quit|upgraded|downgraded|switched|submitted|accepted|moved|"
    r"cancel(?:l)?ed|reserved|ordered)|"
    r"(?:we|i)(?:'ll| will) (?:keep (?:using|polling|the)|stick with|stay (?:with|on))|"
    r"(?:we|i)(?:'ll| will| shall|'re going to| are going to)(?: just| now| all)? (?:use|adopt|switch to|move to|"
    r"migrate to|standardi[sz]e on)|(?:we|i)(?:'re| are|'m| am) (?:going|sticking|staying) with|"
    r"we(?:'ll| will)(?: now)? (?:deploy|host|store|serve|run [^.;!?]{1,60}? on)|"
    r"(?:drop(?:ping)?|replac(?:e|ing)|retir(?:e|ing)) [^.;!?]{1,60}? in favou?r of|"
    r"(?:amend(?:s|ed|ing)?|supersed(?:e|es|ed|ing)|overrid(?:e|es|ing)) (?:the|our|my|that|this|last|previous|"
    r"earlier|keep-\w+)|the decision is)\b"
    r"|^\W*(?:(?:ok(?:ay)?|so|then|alright|right|yes|yeah|fine|no|let's|please)\W+)*(?:instead of [^,;]{1,60},\s*)?"
    r"(?:go with|switch to|stick with|keep using|standardi[sz]e on|migrate to|"
    r"use (?!(?:your|you|it|this|that)\b)\S.{0,80}\bfor\b|replace \S[^.;!?]{0,60}? with\b|make it \d|"
    r"(?:set|cap|pin|bump|raise|lower|increase|reduce|limit|change|move|extend|shorten) (?:the |our )?\S[^.;!?]{0,60}?\b(?:to|at) \d)"
    r"(?!\s+(?:your|you|it)\b)",
    re.IGNORECASE,
)
# A standing rule ("Going forward, ...", "The rule is ...", "Cache keys must always ..."); weaker than a
# preference ("I prefer metric units from now on" stays a preference).
RULE = re.compile(
    r"\b(?:(?:going|moving) forward|from now on|the (?:rule|policy|convention|standard) (?:is|will be|should be)|"
    r"(?<!\bi )(?<!\byou )(?:must|should) now|now (?:must|should)|"
    r"(?<!you )(?:must|should) (?:always|never)|now,? (?:not|instead of|rather than))\b",
    re.IGNORECASE,
)
# A rule stated plainly, with no decision word: "Retries must stop after 4 attempts", "Don't cache API responses
# that carry a Set-Cookie header", "..., so instead cache API responses with a Set-Cookie header too". Chat says the
# same words ("You must try it!", "Don't worry about it", "Never give up", "instead we went hiking"), so the rule
# needs a subject that is not a person or a pointer, a verb that is not chat's, and a technical specific
# (:data:`TECHNICAL`). Chosen on our own amendment sessions (tests/data/amendments/cases.json).
_NOT_A_RULE_VERB = (
    r"(?!(?:worry|forget|mind|hesitate|be|get|feel|let|give|stop|look|miss|lose|say|think|know|want|need|care|"
    r"go|come|leave|tell|ask|try|wait|bother|take|believe|listen|quit|rush)\b)"
)
STATED_RULE = re.compile(
    r"^\W*(?:(?:so|and|also|please|but|then)\W+)*(?:don't|do not|never|always)\s+" + _NOT_A_RULE_VERB + r"[a-z]+"
    r"|(?:^|[,;:]\s*|\b(?:the|our|all|every|each|any|no)\s+)(?!(?:i|you|we|he|she|they|it|this|that|there|who|one|"
    r"everyone|everybody|someone|somebody|nobody|things?|life|people)\b)[a-z][\w-]*(?:\s+[a-z][\w-]*){0,3}?"
    r"\s+(?:must|shall|(?:may|can|should) now)(?:\s+(?:not|never|always|only|still))?\s+(?!(?:have|'ve)\b)[a-z]+"
    r"|\binstead,?\s+(?!(?:of|we|i|you|they|he|she|it|the|a|an|this|that|there|is|are|was|were|just|maybe)\b)"
    + _NOT_A_RULE_VERB
    + r"[a-z]+\b",
    re.IGNORECASE,
)
# A number, a code span, an acronym ("API", "SLA"), a hyphenated header-like name ("Set-Cookie") or an
# identifier with a dot, underscore or slash: what a rule about a system names, and chat seldom does.
TECHNICAL = re.compile(r"\d|`[^`]+`|\b[A-Z]{2,}s?\b|\b[A-Z][a-z]+-[A-Z][\w-]*|\b\w+[._/]\w+")
# A specific the speaker states about themselves or their setup: "we're on Django 4.2", "the API runs on port
# 8080", "my daughter is 7". Counts only with a specific after it (:data:`SPECIFIC`).
FACT = re.compile(
    r"\b(?:(?:we|i)(?:'re| are|'m| am)(?: (?:now|currently|still|already|all))? (?:on|using|running|in|at|"
    r"based in|from|deploying (?:to|on)|hosted on|building (?:on|with)|pinned to|stuck on)|"
    r"(?:we|i)(?: (?:now|currently|still|already|mostly|only|all))? (?:use|run|deploy (?:to|on)|host (?:on|at|with)|"
    r"live in|work (?:at|for|on)|target|build with|pin)|my name is|i was born|i(?:'m| am) \d+|"
    r"(?:our|my|the|this) (?!(?:issue|problem|thing|question|point|idea|reason|trick|catch|answer|result|"
    r"difference|key|best|main|only|first|last|next|same|other|good|bad|worst|fact|truth|plan|goal)\b)"
    r"(?:[\w.+#/-]+ ){0,3}?(?:is|are|was|runs|run|uses|listens on|lives in|is called|is named|is set to|"
    r"defaults to|is pinned to|points to|is hosted on|turned \d)"
    r"(?! (?:that|whether|why|how|what|because|not|so|very|really|too|just|a bit|also|still)\b))\b",
    re.IGNORECASE,
)
# A number, a version, a code span or identifier, or a capitalised name inside the sentence.
SPECIFIC = re.compile(r"\d|`[^`]+`|(?<=[\w,] )[A-Z][\w.+#-]*|\b\w+[._/]\w+")
WEAK_DECISION = re.compile(
    r"\b(?:let's (?:go with|try|use|book|schedule|switch|meet|plan|start|pick|choose|move|set up|do|get|"
    r"order|buy|sign|call|skip|cancel|stick with|keep the)\b"
    r"(?! (?:it|this|that|with|by|to work|together|going|better|more|so|our|some|a look)\b)|"
    # a change to a system, which may name it ("The upload limit is 10 MB; let's enforce it in the API.")
    r"let's (?:not )?(?:set|cap|limit|cache|pin|enable|disable|deploy|host|enforce|require|store|rename|replace|"
    r"drop|remove|bump|raise|lower|increase|reduce|rotate|retry|adopt|migrate|run the|go back to|revert to)\b|"
    r"(?:i|we)(?:'m|'re| am| are)" + _ADV + r" (?:going to|gonna|planning to|planning on|about to)"
    r"(?! (?:keep|continue|stay|be|have to|need)\b)|(?:i|we) plan to|my plan is|the plan is)\b",
    re.IGNORECASE,
)
# "I prefer metric units", "I'd rather not shrink the deal": the speaker's own lasting preference.
PREFERENCE = re.compile(
    r"\b(?:(?:i|we)(?: really| much| still| generally| always)? prefer(?! (?:not to say|to wait and see)\b)|"
    r"(?:i|we)(?:'d| would)(?: much| really)? (?:rather|prefer)|my preference is)\b",
    re.IGNORECASE,
)
COMMITMENT = re.compile(
    r"\b(?:i(?:'ll| will| shall)" + _ADV + r"(?! (?:be|never|always|try|miss|bet|admit|say|see|think|keep going|"
    r"have to|keep that|keep it up|let you know if|make it|get there|do my best|keep (?:pushing|working|going)|"
    r"cherish|remember|treasure|love|enjoy|hope|wait)\b)|i promise|"
    r"we(?:'ll| will) (?:send|email|call|get back|follow up|deliver|ship|schedule|book|refund|credit|fix|check)|"
    r"(?:i|we)(?:'m| am|'re| are) going to (?:send|call|email|finish|deliver|pay|book|submit|share|forward|"
    r"follow|get back)|will send|will get back|will follow up|"
    r"(?<![\w ])remind me to|(?:please|can you|could you) remind me to|"
    r"let me (?:send|check|get back|follow up|look into|find out))\b",
    re.IGNORECASE,
)
SURPRISE = re.compile(
    r"\b(?:(?:didn't|did not|wasn't|was not|never) expect(?:ed|ing)?|(?<!not )(?<!n't )(?<!not even )"
    r"(?:surprised|surprising|surprisingly)|what a surprise|to my surprise|unexpected(?:ly)?|turns out|"
    r"(?<!how )it turned out|turned out that|(?:didn't|did not|never) reali[sz]e|had no idea|can't believe|"
    r"couldn't believe|shocked|who knew|blown away|out of nowhere)\b",
    re.IGNORECASE,
)
ACTION_VERBS = re.compile(
    r"\b(?:send|email|call|finish|deliver|pay|book|submit|share|forward|sign|ship|review|fix|look into|"
    r"check(?! (?:it|them|that|this) out)|follow up|get back|schedule|confirm|update|refund|prepare|upload|"
    r"install|invite)\b",
    re.IGNORECASE,
)
WOW = re.compile(r"\b(?:wow|whoa)\b", re.IGNORECASE)
HEDGE = re.compile(
    r"\b(?:not sure|maybe|might|hopefully|if i|if we|if you|if it|if they|in case|unless)\b", re.IGNORECASE
)
UNANSWERED = re.compile(
    r"\b(?:not sure|don't know|do not know|no idea|i'll check|let me check|i'll find out|get back to you|"
    r"can't say|no clue|i'll look into|need to check|unsure|hard to say|not certain|i'll ask|have to check|"
    r"couldn't tell you|can't tell you|don't have that information)\b",
    re.IGNORECASE,
)
SMALL_TALK_QUESTION = re.compile(
    r"\b(?:how are you|how're you|how have you been|how's it going|how is it going|what's up|whats up|"
    r"what about you|and you|how about you|anything new|anything else|help you with|right\?|isn't it|"
    r"don't you think|you know\?|how's everything|how was your|how've you been|what's new|sound good|"
    r"make sense|does that help|how are things|hbu|wyd)\b",
    re.IGNORECASE,
)
GENERIC_PRAISE = re.compile(
    r"\b(?:so cool|awesome|amazing|so great|that's great|love (?:that|it|this)|proud of you|keep it up|"
    r"you got this|go for it|hang in there|so happy for you|sounds (?:great|fun|awesome)|good luck|"
    r"well done|way to go|you deserve|keep going|keep (?:pushing|at it)|you can do it|that's awesome)\b",
    re.IGNORECASE,
)
# "I'd cap uploads at 100 MB": an assistant suggesting a change to a system in the conditional.
_WOULD_CHANGE = (
    r"i(?:'d| would) (?=(?:cap|set|limit|key|keep|use|retry|store|cache|run|move|switch|raise|lower|drop|reject|split|"
    r"pin|add|make|go with|rate-limit|expire|rotate|log)\b)"
)
# An assistant proposing or restating a rule ("I'd suggest five retries ...", "Got it: money rounds half up ...",
# "So the rule is ...", "To confirm: ..."): the user's decision once the user's next message agrees.
PROPOSAL = re.compile(
    r"^\W*(?:(?:ok(?:ay)?|so|right|great|perfect|then)\W+)*(?:(?:got it|understood|noted|confirmed|to confirm|"
    r"to summari[sz]e|to recap|in summary|in short|summary|to be (?:explicit|clear|precise)(?: about [^:]{1,80})?)"
    r"\s*[:—–-]\s*|(?:so,? )?the (?:rule|policy|convention) "
    r"(?:is|would be|will be)\b[:,]?\s*|i(?:'d| would) (?:suggest|recommend|propose)\b\s*|" + _WOULD_CHANGE + r"|"
    r"i (?:suggest|recommend|propose)\b\s*|my (?:suggestion|recommendation) (?:is|would be)\b[:,]?\s*)",
    re.IGNORECASE,
)
# An assistant asking whether to make a change ("Should I raise the limit to 200 requests per minute?") or confirming
# one ("So the export moves to 04:00 UTC?"): the user's decision once the user's next message agrees, when it names a
# specific (:data:`SPECIFIC`); its lead is not the rule.
OFFER = re.compile(
    r"^\W*(?:(?:ok(?:ay)?|so|then|alright)\W+)*(?:(?:should|shall) (?:i|we)|(?:do you want|would you like|want) me to)\s+"
    r"|^\W*(?:so|then),?\s+(?!(?:what|how|why|who|where|when|which|should|shall|do|does|did|is|are|can|could|would|will|"
    r"you|i)\b)",
    re.IGNORECASE,
)
# The part of :data:`PROPOSAL` that offers rather than restates: a suggestion nobody answered settles nothing.
SUGGESTION = re.compile(
    r"\b(?:i(?:'d| would)? (?:suggest|recommend|propose)|my (?:suggestion|recommendation))\b|^\W*" + _WOULD_CHANGE, re.I
)
# An assistant asking the user to choose ("How long should we keep the audit logs?", "Which one do you want?"): the
# user's answer, when it names a specific, is the user's decision ("Keep them for 90 days, then delete them.").
CHOICE_QUESTION = re.compile(
    r"\b(?:should|shall) (?:we|i)\b|\bdo you want (?:me|us|to)\b|\bwould you (?:like|prefer)\b|\bwhich (?:one|option)\b|"
    r"\bwhat (?:should|shall) (?:it|the|we|our)\b",
    re.IGNORECASE,
)
# A reply that agrees with what was just proposed or written down ("Yes", "Agreed.", "Sounds good, ship it").
AGREEMENT = re.compile(
    r"^\W*(?:yes|yep|yeah|yup|agreed|i agree|sounds (?:good|right|great)|ok(?:ay)?|perfect|great|exactly|correct|"
    r"right|good|do (?:it|that)|please do|go ahead|let's do (?:it|that)|ship it|lgtm|looks good|that works|works for me|deal|fine|approved|"
    r"confirmed|makes sense|good call|that(?:'s| is) (?:it|right|correct|the (?:rule|plan|policy|decision|one|way)))\b"
    r"(?![^.!?]*\b(?:but|except|however|not|don't|no)\b)",
    re.IGNORECASE,
)
# A reply that only points back at what was just said ("That's the rule going forward, yes."): its content is the
# message it agrees to, so it is no event of its own.
REFERS_BACK = re.compile(
    r"^\W*(?:(?:yes|yep|yeah|exactly|right|correct)\W+)?that(?:'s| is) (?:it|right|correct|"
    r"the (?:rule|plan|policy|decision|one|way))\b",
    re.IGNORECASE,
)
SECOND_PERSON = re.compile(r"\b(?:you|your|you're|you've|yours)\b", re.IGNORECASE)


# A veto is checked once, after detection, for every cue that lists it: a hedge ("Not sure, maybe we will switch to
# Kafka"), a condition ("If the load doubles we'll go with Kafka") or a question makes a cue no event.
VETOES: dict[str, Callable[[str], bool]] = {
    "question": lambda text: text.rstrip().endswith("?"),
    "hedge": lambda text: bool(HEDGE.search(text)),
    "praise": lambda text: bool(GENERIC_PRAISE.search(text)),
    "second_person": lambda text: bool(SECOND_PERSON.search(text)),  # "wow, you ..." is praise for the other
}


@dataclass(frozen=True)
class Candidate:
    """A cue rule that fired on a sentence: its rule, the type it suggests and where its cue starts."""

    rule: str
    type: CueType
    start: int
    vetoes: tuple[str, ...]


@dataclass(frozen=True)
class CueRule:
    id: str
    type: CueType
    pattern: re.Pattern[str]
    min_substance: int = 0
    requires: tuple[str, ...] = ()
    vetoes: tuple[str, ...] = ("question", "hedge")
    anchored: bool = False  # matched at the start of the sentence (a label), else searched


# Cue rules by priority: the first that survives its vetoes decides the sentence's type.
CUE_RULES: tuple[CueRule, ...] = (
    CueRule("decision.label", "decision", DECISION_LABEL, anchored=True),
    CueRule("decision.strong", "decision", STRONG_DECISION),
    CueRule("preference", "preference", PREFERENCE, min_substance=2),
    CueRule("decision.rule", "decision", RULE, min_substance=2),
    CueRule("decision.stated_rule", "decision", STATED_RULE, min_substance=3, requires=("technical",)),
    CueRule("commitment", "commitment", COMMITMENT, requires=("substance_or_action",)),
    CueRule("decision.weak", "decision", WEAK_DECISION, min_substance=2, requires=("due_action_is_commitment",)),
    CueRule("surprise", "surprise", SURPRISE, min_substance=2),
    CueRule("surprise.wow", "surprise", WOW, min_substance=5, vetoes=("question", "hedge", "praise", "second_person")),
    CueRule("fact", "fact", FACT, min_substance=1, requires=("near_start", "specific_after")),
)


def _requirements_hold(rule: CueRule, text: str, m: re.Match[str], substance: int) -> bool:
    """The conditions a rule sets on the rest of its sentence (beyond its own pattern)."""
    checks: dict[str, Callable[[], bool]] = {
        "technical": lambda: bool(TECHNICAL.search(text)),
        "substance_or_action": lambda: substance >= 2 or bool(ACTION_VERBS.search(text[m.start() :])),
        "near_start": lambda: m.start() <= 60,
        "specific_after": lambda: bool(SPECIFIC.search(text, m.end() - 1)),
        "due_action_is_commitment": lambda: True,
    }
    return substance >= rule.min_substance and all(checks[name]() for name in rule.requires)


def candidates(text: str, names: Iterable[str] = ()) -> list[Candidate]:
    """Stage 1: every cue rule that fires on ``text`` (normalised) with its conditions met, by priority."""
    substance = len(content_words(text, exclude=names))  # "Jon, I'm gonna make it!" has none
    out: list[Candidate] = []
    for rule in CUE_RULES:
        m = rule.pattern.match(text) if rule.anchored else rule.pattern.search(text)
        if m is None or not _requirements_hold(rule, text, m, substance):
            continue
        kind = rule.type
        if "due_action_is_commitment" in rule.requires:  # "let's send it by Friday" is a commitment
            due_like = resolve_due(text, dt.date(2000, 1, 3)) is not None
            kind = "commitment" if due_like and ACTION_VERBS.search(text) else kind
        out.append(Candidate(rule.id, kind, 0 if rule.anchored else m.start(), rule.vetoes))
    return out


def surviving(found: list[Candidate], text: str) -> list[Candidate]:
    """Stage 2: the candidates that none of their vetoes strikes, each veto checked once per sentence."""
    struck = {name for name in {v for c in found for v in c.vetoes} if VETOES[name](text)}
    return [c for c in found if not struck.intersection(c.vetoes)]


def cue(sentence: str, names: Iterable[str] = ()) -> tuple[CueType, int] | None:
    """The event type a sentence's cue words suggest and where the cue starts (questions are separate).

    Cues need some substance around them: "I'll keep you posted" or "let's do this!" are chat, not events.
    """
    text = normalise(sentence)
    kept = surviving(candidates(text, names), text)
    return (kept[0].type, kept[0].start) if kept else None


def clause_from(sentence: str, start: int) -> str:
    """The clause a cue starts: from the cue to the next clause break. "Maria, I'm so excited to tell you
    I joined a gym - it's great!" -> "I joined a gym". Used only when it reads as a sentence on its own."""
    rest = normalise(sentence)[start:]
    cut = re.search(r"\s[-–—]\s|[;:!?]|\.(?:\s|$)|,\s(?:but|so|and then|which|because)\b", rest)
    return rest[: cut.start()].strip() if cut else rest.strip()
