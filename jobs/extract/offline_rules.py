"""Text rules for the offline extractor: sentences, words, pronoun rewriting, cues, dates, entities.

Everything here is plain regular expressions and word lists, with no model and no state, so the
offline extractor stays deterministic and fast. The rules are deliberately conservative: when a
rule is unsure it declines (returns ``None``) and the caller falls back to something safe, such as
quoting the speaker verbatim, rather than writing a wrong or ungrammatical sentence.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

# ------------------------------------------------------------------------------------------------
# Words
# ------------------------------------------------------------------------------------------------

# Words that never make a topic tag on their own: English function words, chat filler, generic verbs
# and adjectives, weekdays and months, company suffixes, and the commonest German/French/Spanish
# function words (so a non-English session does not get "den" or "que" as a topic).
STOPWORDS = frozenset(
    """
    a about above after again against all almost also although always am among an and another any anybody
    anyone anything anyway anyways are aren't around as at away back be became because become been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't
    done down during each either else enough even ever every everybody everyone everything few for from
    further get gets getting got gotten had hadn't has hasn't have haven't having he he'd he'll he's her
    here here's hers herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it
    it'd it'll it's its itself just least less let let's like likely lot lots made make makes making many
    may maybe me might mine more most much must my myself near need needs neither never next no nobody none
    nor not nothing now of off often oh ok okay on once one ones only onto or other others otherwise ought
    our ours ourselves out over own per perhaps please quite rather really same say says said see seen
    seem seems shall shan't she she'd she'll she's should shouldn't since so some somebody someone
    something sometimes somewhat soon still such sure than that that's the their theirs them themselves
    then there there's these they they'd they'll they're they've thing things this those though through
    thus till to too toward towards under until up upon us use used very via was wasn't we we'd we'll
    we're we've well were weren't what what's whatever when when's where where's whether which while who
    who's whom whose why why's will with within without won't would wouldn't yes yet you you'd you'll
    you're you've your yours yourself yourselves
    hey hi hello thanks thank thx yeah yep yup nope wow awesome great cool nice amazing glad good bad
    love loved lovely happy sorry hope hoping wish fun super totally definitely absolutely honestly
    actually literally pretty kind sort stuff lol haha omg gonna wanna gotta kinda sounds sound feel feels
    feeling felt think thinks thought know knows knew want wants wanted going go goes went come comes
    came take takes took taking give gives gave look looks looking looked keep keeps kept tell told
    talk talking talked day days today tomorrow yesterday time times week weeks year years month
    months way ways bit lots much many new old big little last first next great glad mean means meant
    help helps helped find found try tried trying able awesome incredible wonderful fantastic
    inspiring inspired special important true right left best better tough hard real
    photo photos pic pics picture pictures image shares share shared sharing work working worked wait
    waiting join joined make made start started starting need needed doing trying getting happen happened
    believe enjoy enjoyed appreciate remember understand chance hear heard worth matter care together
    difference proud excited exciting cute beautiful definitely hang everything anything whole
    lucky different favorite favourite similar perfect positive negative creative huge tiny small large
    entire sweet crazy wild busy free easy fine okay interesting glad grateful thankful stoked peaceful
    powerful meaningful rewarding fulfilling incredible unique awesome cozy fab delish yummy dope
    people person life lives thing guy guys folks part moment moments memory memories experience experiences
    world journey stuff idea ideas kinda lately recently soon course sense reminder reminders wonder
    bring brings brought seeing pushing watching check checking expressing key keen lot whoa yay
    der die das den dem des und ist ich sie wir ihr ihnen nicht mit für auf ein eine einen einem einer sind
    war haben habe hat wird werden auch noch aber oder wenn dass les une est pas pour que qui dans avec sur
    sont nous vous ils elle mais ont été los las una por para con del como pero más este esta está
    ltd inc llc corp gmbh monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur
    thurs fri sat sun january february march april june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec
    """.split()
)

# Openers dropped before rewriting or quoting: "Yeah I ..." needs no comma; "so", "well", "thanks"
# and the like only count when punctuated ("So far, so good" keeps its "So"); a greeting may carry
# a vocative ("Hey Jon, my store ..." -> "my store ...").
INTERJECTION = re.compile(
    r"^(?:(?:(?:yeah|yes|yep|no(?! way)|nope|oh|ooh|wow|hey|hi|hello|haha|lol|ok|okay|omg|um|uh|ah|aw|yay)\b"
    r"(?:[\s,]+(?:(?-i:[A-Z][\w'-]*)|there|all|guys|everyone)(?=\s*[,!.]))?[\s,!.;:-]*)"
    r"|(?:(?:so|well|sure|great|cool|thanks|thank you|totally|absolutely|honestly|actually|anyway|anyways|"
    r"right|alright|awesome|nice|sweet|congrats)(?:[\s,]+(?-i:[A-Z][\w'-]*))?\s*[,!.;:-]+\s*))+",
    re.IGNORECASE,
)
PLEASANTRY = re.compile(
    r"^\W*(?:hey|hi|hello|thanks|thank you|bye|good ?bye|see you|talk (?:to you )?soon|take care|"
    r"good to see|nice to|glad to|have a (?:great|good|nice)|you're welcome|no problem|sounds good|"
    r"same here|me too|of course|congrat)",
    re.IGNORECASE,
)

_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
_NUMBER = re.compile(r"(?:[$€£¥]\s?\d|\d+(?:[.,:/]\d+)*\s?(?:%|k\b|m\b|usd|eur)?)", re.IGNORECASE)
# Never a sentence end. (Company suffixes are not here: "... Acme Ltd. We'll ..." does end a sentence.)
_ABBREV = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|St|vs|etc|e\.g|i\.e|Jr|Sr|No|approx)\.)$")
_SPLIT = re.compile(r"(?<=[.!?。！？])[\"')\]]*\s+|\n+|(?<=[。！？])")
_CODE = re.compile(r"```.*?```", re.DOTALL)


def normalise(text: str) -> str:
    """Straight quotes and apostrophes, code blocks folded: later rules can assume one spelling."""
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    return _CODE.sub(" [code] ", text)


def split_sentences(text: str, max_sentences: int = 40, max_chars: int = 400) -> list[str]:
    """Split one message into sentences. Long messages are capped so work stays bounded."""
    pieces: list[str] = []
    for raw in _SPLIT.split(normalise(text)):
        piece = " ".join(raw.split())
        if not piece:
            continue
        if pieces and _ABBREV.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
        if len(pieces) > max_sentences:
            break
    return [clip(p, max_chars) for p in pieces[:max_sentences] if any(ch.isalnum() for ch in p)]


def clip(text: str, limit: int) -> str:
    """Shorten at a word boundary with an ellipsis (model fields have hard length limits)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else text[: limit - 1]).rstrip(",;:- ") + "…"


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def has_number(text: str) -> bool:
    return bool(_NUMBER.search(text))


def content_words(text: str, exclude: Iterable[str] = ()) -> list[str]:
    """Lowercase words that can carry a topic (no stopwords, no names in ``exclude``)."""
    skip = {w.lower() for w in exclude}
    out = []
    for w in words(text):
        low = w.lower().strip("'-")
        if len(low) < 3 or len(low) > 20 or low in STOPWORDS or low in skip or low.endswith("'s"):
            continue
        out.append(low)
    return out


# ------------------------------------------------------------------------------------------------
# First person -> third person
# ------------------------------------------------------------------------------------------------

_OTHER_PRONOUNS = re.compile(r"\b(?:we|we're|we've|we'll|we'd|us|our|ours|ourselves|you|you're|you've|you'll|you'd|"
                             r"your|yours|yourself|y'all|ya)\b", re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'll|I'd|me|my|mine|myself)\b", re.IGNORECASE)
_ADVERBS = frozenset(
    "really just also still always never actually finally totally already even recently definitely probably "
    "usually often sometimes only truly honestly absolutely personally now then once seriously".split()
)
_KEEP_VERB = frozenset(  # past tenses, modals and ambiguous forms: identical in the third person
    "was did had could would should might must may can will shall can't couldn't wouldn't shouldn't won't "
    "didn't wasn't hadn't mustn't went got made took saw found felt thought said told knew came gave bought "
    "began became brought built ran wrote left lost met paid sent spent kept heard won chose drew drove "
    "fell flew forgot grew held hung led lent meant rode rose sang sat slept sold spoke stood stole swam "
    "taught threw understood woke wore read put cut set hit let quit used ate".split()
)
_PRESENT_ED = frozenset("need feed bleed breed speed proceed succeed exceed heed seed shed embed".split())
_NOT_VERB = frozenset("and or but too the a an to in on at of for with as if so than that this it".split())
_SPECIAL_3RD = {"have": "has", "do": "does", "go": "goes", "don't": "doesn't", "haven't": "hasn't", "am": "is",
                "be": "is", "say": "says"}


def _third_singular(verb: str) -> str | None:
    low = verb.lower()
    if low in _KEEP_VERB or (low.endswith("ed") and low not in _PRESENT_ED):
        return verb
    if low in _SPECIAL_3RD:
        return _SPECIAL_3RD[low]
    if not low.isalpha() or low in _NOT_VERB or low in {"wanna", "gotta", "gonna", "dunno"}:
        return None
    if re.search(r"(?:s|sh|ch|x|z|o)$", low):
        return verb + "es"
    if re.search(r"[^aeiou]y$", low):
        return verb[:-1] + "ies"
    return verb + "s"


def _agree(verb: str, singular: bool) -> str | None:
    """The verb after "I", made to agree with a name (singular) or with "they" (plural)."""
    low = verb.lower()
    if not singular:
        return {"am": "are", "was": "were", "wasn't": "weren't"}.get(low, verb)
    return "is" if low == "am" else _third_singular(verb)


_COMPOUND_SUBJECT = re.compile(r"(?:^|[,;:-]\s*)(?:my|his|her|their|the|a|an|[A-Z]\w+)(?:\s+[\w'-]+){0,2}\s+(?:and|&) I\b"
                               r"|\bI (?:and|&) ")


def third_person(sentence: str, label: str) -> str | None:
    """Rewrite a first-person sentence by ``label`` into the third person, or ``None`` if unsure.

    Only I/me/my/mine/myself are rewritten; any we/you/our makes the referent ambiguous, so the
    caller quotes instead. The first subject becomes the name, later ones become "they".
    """
    text = INTERJECTION.sub("", normalise(sentence)).strip()
    if not text or _OTHER_PRONOUNS.search(text) or not _FIRST_PERSON.search(text) or shouting(text):
        return None
    if _COMPOUND_SUBJECT.search(text):  # "My girlfriend and I had ...": the verb is plural
        return None
    tokens = re.findall(r"[A-Za-z]+(?:'[A-Za-z]+)?|[^A-Za-z\s]+|\s+", text)
    out: list[str] = []
    named = False
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        low = tok.lower()
        if tok in ("I", "I'm", "I've", "I'll", "I'd"):
            singular = not named  # the first subject is the name, later ones "they"
            subject = label if singular else "they"
            named = True
            if tok == "I'm":
                out.append(f"{subject} {'is' if singular else 'are'}")
            elif tok == "I've":
                out.append(f"{subject} {'has' if singular else 'have'}")
            elif tok == "I'll":
                out.append(f"{subject} will")
            elif tok == "I'd":
                nxt = _next_word(tokens, i)
                if nxt == "been":
                    out.append(f"{subject} had")
                elif nxt in {"love", "like", "say", "rather", "recommend", "suggest", "prefer", "be", "want", "need",
                             "guess", "imagine", "think", "appreciate", "go", "do", "have"}:
                    out.append(f"{subject} would")
                else:
                    return None
            else:  # bare I: find the verb (skipping adverbs) and make it agree with the new subject
                j, verb = _verb_after(tokens, i)
                new = None if verb is None else _agree(verb, singular)
                if new is None:
                    return None
                out.append(subject)
                out.extend(tokens[i + 1 : j])
                out.append(new)
                i = j + 1
                continue
            i += 1
            continue
        if low == "me":
            out.append("them" if named else label)
            named = True
        elif low == "my":
            out.append("their" if named else f"{label}'s")
            named = True
        elif low == "mine":
            out.append("theirs" if named else f"{label}'s")
            named = True
        elif low == "myself":
            out.append("themselves")
        else:
            out.append(tok)
        i += 1
    result = "".join(out).strip()
    if label not in result:
        return None
    if label.startswith("The "):  # "By the way, the user went ..." mid-sentence
        result = result.replace(label, label.lower())
    return result[0].upper() + result[1:]


def shouting(text: str) -> bool:
    """Mostly capital letters: case carries no information (no rewriting, no names from capitals)."""
    letters = [ch for ch in text if ch.isalpha()]
    return len(letters) >= 8 and sum(ch.isupper() for ch in letters) > 0.6 * len(letters)


_ENGLISH_CORE = frozenset(
    "the a an and or but to of in on at for with from about as by is are was were be been i you he she it we they "
    "my your our their this that not no have has had do does did will would can could i'm i've i'll i'd it's "
    "don't we'll we're you're that's what how so just me us him her them its when if there here very really".split()
)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def looks_english(text: str) -> bool:
    """Enough English function words that capitalisation means names (German capitalises every noun)."""
    tokens = [w.lower() for w in words(text)]
    if len(tokens) < 6:
        return not _CJK.search(text)
    return sum(w in _ENGLISH_CORE for w in tokens) >= 0.2 * len(tokens)


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def _next_word(tokens: list[str], i: int) -> str | None:
    for tok in tokens[i + 1 :]:
        if tok.isspace():
            continue
        return tok.lower() if tok[0].isalpha() else None
    return None


def _verb_after(tokens: list[str], i: int) -> tuple[int, str | None]:
    """Index and text of the first non-adverb word after token ``i`` (None if punctuation comes first)."""
    j = i + 1
    while j < len(tokens):
        tok = tokens[j]
        if tok.isspace():
            j += 1
            continue
        if not tok[0].isalpha():
            return j, None
        low = tok.lower()
        if low in _ADVERBS or (low.endswith("ly") and len(low) > 4):
            j += 1
            continue
        return j, tok
    return j, None


def attribute(sentence: str, label: str, verb: str = "said") -> str:
    """A third-person rendering of ``sentence``: rewritten when safe, else quoted with the speaker."""
    if m := DECISION_LABEL.match(normalise(sentence)):  # "Decision: we ship on Tuesday."
        return f'{label} decided: "{m.group(1).strip().replace(chr(34), chr(39))}"'
    rewritten = third_person(sentence, label)
    if rewritten:
        return rewritten
    original = normalise(sentence).strip()
    body = INTERJECTION.sub("", original).strip() or original
    if body != original and body[:1].islower():  # "yeah, the docs ..." -> "The docs ..."
        body = body[0].upper() + body[1:]
    return f'{label} {verb}: "{body.replace(chr(34), chr(39))}"'


# ------------------------------------------------------------------------------------------------
# Event cues
# ------------------------------------------------------------------------------------------------

DECISION_LABEL = re.compile(r"^\W*decision(?: then| made)?\s*[:—–-]\s*(.{3,})", re.IGNORECASE)
_ADV = r"(?: (?:just|also|finally|already|really|definitely|probably|actually|officially|recently|now))?+"
STRONG_DECISION = re.compile(
    r"\b(?:(?:we|i)(?:'ll| will|'re going to| are going to|'m going to| am going to)? go(?:ing)? with|"
    r"(?:i|we)(?:'ve| have)?" + _ADV + r" (?:decided|chosen|chose|picked|opted|settled on|committed to)|"
    r"decided to|we(?:'ve| have)?" + _ADV + r" agreed|agreed to|settled on|opted for|made up my mind|"
    r"(?:i|we)(?:'ll| will) take the|(?:i|we)(?:'m|'re| am| are) switching to|"
    r"(?:i|we)(?:'ve| have)?" + _ADV + r" (?:signed up|registered|enrolled|subscribed|joined|applied|adopted|"
    r"booked|started|bought|purchased|quit|upgraded|downgraded|switched|submitted|accepted|moved|"
    r"cancel(?:l)?ed|reserved|ordered)|"
    r"(?:we|i)(?:'ll| will) (?:keep (?:using|polling|the)|stick with|stay (?:with|on)))\b"
    r"|^\W*decision(?: then| made)?\s*[:—–-]",
    re.IGNORECASE,
)
WEAK_DECISION = re.compile(
    r"\b(?:let's (?:go with|try|use|book|schedule|switch|meet|plan|start|pick|choose|move|set up|do|get|"
    r"order|buy|sign|call|skip|cancel|stick with|keep the)\b"
    r"(?! (?:it|this|that|with|by|to work|together|going|better|more|so|our|some|a look)\b)|"
    r"(?:i|we)(?:'m|'re| am| are)" + _ADV + r" (?:going to|gonna|planning to|planning on|about to)"
    r"(?! (?:keep|continue|stay|be|have to|need)\b)|(?:i|we) plan to|my plan is|the plan is)\b",
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
HEDGE = re.compile(r"\b(?:not sure|maybe|might|hopefully|if i|if we|if you|if it|if they|in case|unless)\b",
                   re.IGNORECASE)
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
SECOND_PERSON = re.compile(r"\b(?:you|your|you're|you've|yours)\b", re.IGNORECASE)

def cue(sentence: str, names: Iterable[str] = ()) -> tuple[str, int] | None:
    """The event type a sentence's cue words suggest and where the cue starts (questions are separate).

    Cues need some substance around them: "I'll keep you posted" or "let's do this!" are chat, not events.
    """
    text = normalise(sentence)
    if text.rstrip().endswith("?"):
        return None
    substance = len(content_words(text, exclude=names))  # "Jon, I'm gonna make it!" has none
    if m := STRONG_DECISION.search(text):
        return "decision", m.start()
    if (m := COMMITMENT.search(text)) and not HEDGE.search(text):
        if substance >= 2 or ACTION_VERBS.search(text[m.start():]):
            return "commitment", m.start()
    if (m := WEAK_DECISION.search(text)) and substance >= 2:
        due_like = resolve_due(text, dt.date(2000, 1, 3)) is not None
        return ("commitment" if due_like and ACTION_VERBS.search(text) else "decision"), m.start()
    if (m := SURPRISE.search(text)) and substance >= 2:
        return "surprise", m.start()
    if (m := WOW.search(text)) and substance >= 5 and not GENERIC_PRAISE.search(text) \
            and not SECOND_PERSON.search(text):  # "wow, you ..." is praise for the other speaker
        return "surprise", m.start()
    return None


def clause_from(sentence: str, start: int) -> str:
    """The clause a cue starts: from the cue to the next clause break. "Maria, I'm so excited to tell you
    I joined a gym - it's great!" -> "I joined a gym". Used only when it reads as a sentence on its own."""
    rest = normalise(sentence)[start:]
    cut = re.search(r"\s[-–—]\s|[;:!?]|\.(?:\s|$)|,\s(?:but|so|and then|which|because)\b", rest)
    return rest[: cut.start()].strip() if cut else rest.strip()


# ------------------------------------------------------------------------------------------------
# Due dates
# ------------------------------------------------------------------------------------------------

_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december"]
_MONTH_RE = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_DUE_WEEKDAY = re.compile(r"\b(?:by|on|before|until|this|next|coming)\s+(?:(?:this|next|the)\s+)?(" +
                          "|".join(_WEEKDAYS) + r")\b", re.IGNORECASE)
_BARE_WEEKDAY = re.compile(r"\b(" + "|".join(_WEEKDAYS) + r")\b", re.IGNORECASE)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DAY_MONTH = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH_RE + r"(?:,?\s+(\d{4}))?",
                        re.IGNORECASE)
_MONTH_DAY = re.compile(r"\b" + _MONTH_RE + r"\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4}))?", re.IGNORECASE)
_IN_N = re.compile(r"\bin\s+(\d+|a|one|two|three|four|five|six|seven)\s+(day|week)s?\b", re.IGNORECASE)
_SMALL_NUM = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}


def _month_number(token: str) -> int:
    prefix = token.lower()[:3]
    return [m[:3] for m in _MONTHS].index(prefix) + 1


def _safe_date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def _future(ref: dt.date, month: int, day: int, year: str | None) -> dt.date | None:
    if year:
        return _safe_date(int(year), month, day)
    candidate = _safe_date(ref.year, month, day)
    if candidate and candidate < ref - dt.timedelta(days=7):
        candidate = _safe_date(ref.year + 1, month, day)
    return candidate


def resolve_due(text: str, ref: dt.date) -> dt.date | None:
    """The date a commitment is due, from phrases like "by Friday", "tomorrow", "on 5 March", "in 2 weeks"."""
    low = text.lower()
    if m := _ISO.search(text):
        return _safe_date(int(m[1]), int(m[2]), int(m[3]))
    if m := _DAY_MONTH.search(text):
        return _future(ref, _month_number(m[2]), int(m[1]), m[3])
    if m := _MONTH_DAY.search(text):
        if m[1].lower() != "may" or re.search(r"\bmay\s+\d", text):  # "may 5" but not "I may 2..." noise
            return _future(ref, _month_number(m[1]), int(m[2]), m[3])
    if re.search(r"\btomorrow\b", low):
        return ref + dt.timedelta(days=1)
    if re.search(r"\b(?:today|tonight|end of (?:the )?day|eod)\b", low):
        return ref
    if re.search(r"\bend of (?:the |this )?week\b", low):
        return ref + dt.timedelta(days=(4 - ref.weekday()) % 7)
    if re.search(r"\bend of (?:the |this )?month\b", low):
        nxt = (ref.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
        return nxt - dt.timedelta(days=1)
    if re.search(r"\bnext week\b", low):
        return ref + dt.timedelta(days=7)
    if m := _IN_N.search(text):
        n = int(m[1]) if m[1].isdigit() else _SMALL_NUM[m[1].lower()]
        return ref + dt.timedelta(days=n * (7 if m[2].lower() == "week" else 1))
    m = _DUE_WEEKDAY.search(text) or _BARE_WEEKDAY.search(text)
    if m:
        target = _WEEKDAYS.index(m[1].lower())
        ahead = (target - ref.weekday()) % 7 or 7
        return ref + dt.timedelta(days=ahead)
    return None


# ------------------------------------------------------------------------------------------------
# Entities
# ------------------------------------------------------------------------------------------------

_NAME_WORD = r"(?:[A-Z][\w&'-]*[\w]|[A-Z]|[a-z]+[A-Z]\w*)"
_NAME_SEQ = re.compile(rf"{_NAME_WORD}(?:(?:\s+(?:of|de|la|van|von|&)\s+|\s+){_NAME_WORD}){{0,4}}")
_ORG_SUFFIX = re.compile(r"\b(?:Inc|Ltd|LLC|Corp|Corporation|Company|Co|GmbH|Group|Bank|University|College|"
                         r"School|Foundation|Institute|Agency|Association|Club|Church|Hospital|Labs?|Studios?|"
                         r"Systems|Technologies|Partners)\.?$")
_PLACE_SUFFIX = re.compile(r"\b(?:City|Street|St|Avenue|Ave|Road|Park|Lake|River|Beach|Island|Islands|Mountains?|"
                           r"County|Valley|Bay|Airport|Canyon|Falls)\.?$")
_PRODUCT_AFTER = re.compile(r"^\s+(plan|tier|edition|subscription|package|license|app|model|card|account)\b")
_PROJECT = re.compile(r"^Project\b|\bProject$")
_PERSON_BEFORE = re.compile(
    r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof)\.?|\bmy (?:friend|sister|brother|mom|mum|dad|mother|father|wife|husband|partner|"
    r"son|daughter|boss|colleague|cousin|aunt|uncle|grandma|grandpa|grandmother|grandfather|neighbou?r|"
    r"roommate|coworker|manager|teacher|mentor|kid|friends)|\b(?:hey|hi|hello|thanks|thank you|dear|bye),?|"
    r"\b(?:I'm|I am|my name is|this is|named))\s+$",
    re.IGNORECASE,
)
# Bare "to/in/from" precede people ("send it to Katrin") and products ("in Snowflake") as often as places,
# so only travel and residence verbs count.
_PLACE_BEFORE = re.compile(
    r"\b(?:trip to|flew to|fly to|flying (?:to|into|out of)|travel(?:l?ed|l?ing)? to|"
    r"visit(?:ed|ing)?|live[sd]? in|living in|based in|back from|went to|go to|going to|arrived (?:in|at)|"
    r"stay(?:ed|ing)? in|born in|grew up in|vacation in|holiday in)\s+$",
    re.IGNORECASE,
)
_PERSON_AFTER = re.compile(
    r"^(?:,\s+(?:our|my|your|the|their) \w+|\s+(?:said|says|told|tells|asked|asks|thinks|thought|wants|wanted|"
    r"confirmed|approved|suggested|suggests|mentioned|replied|wrote|emailed|called|texted|agreed|promised|"
    r"is (?:our|my|your|their|the) \w+|was (?:our|my|your|their) \w+))\b"
)
_NOT_NAMES = frozenset(
    "I I'm I'll I've I'd OK Ok Okay Hey Hi Hello Thanks Thank Yes No Wow Oh Yeah Yep Nope Sure Great Cool Nice "
    "Awesome Lol Haha Omg Bye Please Sorry Well So And But Or The A An This That These Those It It's My Our Your "
    "We You He She They Mr Mrs Ms Dr Also Just Then Now Here There What When Where Why How Who Which "
    "Congrats Congratulations Agreed Absolutely Totally Definitely Good Happy Love Amazing Right Anyway Welcome "
    "Dear Morning Evening Afternoon Night Glad Sorry Hmm Ah Aw Yay Ooh Oops".split()
)
_CALENDAR = frozenset(w.capitalize() for w in _WEEKDAYS + _MONTHS) | {"Today", "Tomorrow", "Yesterday"} | set(
    "Mon Tue Tues Wed Thu Thur Thurs Fri Sat Sun Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec".split())
_GAZETTEER = frozenset(
    "Paris London Berlin Rome Madrid Tokyo Beijing Sydney Toronto Vancouver Chicago Boston Seattle Austin "
    "Denver Miami Dallas Houston Atlanta Portland Brooklyn Manhattan California Texas Florida Oregon Washington "
    "Kyoto Osaka Seoul Singapore Dubai Amsterdam Barcelona Lisbon Prague Vienna Munich Hamburg Oslo Stockholm "
    "Copenhagen Helsinki Dublin Edinburgh Mumbai Delhi Bangalore Shanghai Bangkok Cairo Nairobi Lagos Melbourne "
    "Auckland Montreal Philadelphia Phoenix Nashville Istanbul Athens Warsaw Budapest Zurich Geneva Brussels "
    "Milan Venice Florence Naples Nara Hokkaido Bali Iceland Norway Peru Chile Argentina Colombia Egypt Kenya "
    "Nigeria Morocco Turkey Israel Russia Ukraine Indonesia Philippines Malaysia Taiwan Belgium Hungary "
    "Colorado Nevada Arizona Hawaii Alaska Canada Mexico Brazil France Germany Spain Italy Japan China India "
    "Australia England Ireland Scotland Sweden Norway Denmark Finland Netherlands Switzerland Austria Poland "
    "Greece Portugal Thailand Vietnam Korea Europe Asia Africa America USA UK NYC LA".split()
) | {"New York", "San Francisco", "Los Angeles", "New Zealand", "South Africa", "United States", "Las Vegas",
                "Hong Kong", "Mexico City", "San Diego", "New Orleans", "Buenos Aires", "Rio de Janeiro"}


@dataclass
class EntityHit:
    name: str
    kind: str
    count: int
    first: int  # position of the first mention (global sentence order) for stable ranking


def find_entities(sentences: list[str], speakers: Iterable[str]) -> list[EntityHit]:
    """Capitalised names, with a kind from simple context rules, most mentioned first.

    Capitals are weak evidence on their own, so: a word the transcript also writes in lowercase
    ("Settings" / "settings", "Team" / "team") is not a name, nor is a sentence-initial word
    unless it shows up mid-sentence or has a name's shape (CamelCase, digits, a company suffix,
    several words); acronyms need two mentions and rank last.
    """
    speaker_set = {s for s in speakers if s}
    drop = _NOT_NAMES | _CALENDAR
    lowercase = {w for text in sentences for w in words(text) if w[0].islower()}
    hits: dict[str, EntityHit] = {}
    kinds: dict[str, list[str]] = {}
    mid_sentence: set[str] = set()
    for pos, sentence in enumerate(sentences):
        for m in _NAME_SEQ.finditer(sentence):
            parts = [(w.group(0), m.start() + w.start()) for w in re.finditer(r"\S+", m.group(0))]
            while parts and (_not_name(parts[0][0], drop) or (len(parts) > 1 and parts[0][0].lower() in lowercase
                                                              and not re.search(r"[A-Za-z]", sentence[:parts[0][1]]))):
                parts = parts[1:]  # "Open Settings" at a sentence start, with "open" written elsewhere
            while parts and _not_name(parts[-1][0], drop):
                parts = parts[:-1]
            if not parts:
                continue
            begin, end = parts[0][1], parts[-1][1] + len(parts[-1][0])
            name = sentence[begin:end]
            if name.endswith("'s"):
                name, end = name[:-2], end - 2
            kind = _kind(name, sentence[:begin], sentence[end:], speaker_set)
            if product := _PRODUCT_AFTER.match(sentence[end:]):  # "the Team plan"
                name, end = name + product.group(0), end + len(product.group(0))
            if len(name) < 2 or len(name) > 120:
                continue
            if re.search(r"[A-Za-z]", sentence[:begin]):
                mid_sentence.add(name)
            kinds.setdefault(name, []).append(kind)
            hit = hits.setdefault(name, EntityHit(name, "other", 0, pos))
            hit.count += 1
    for name in [n for n in hits if n not in mid_sentence and " " in n]:
        rest = name.split(" ", 1)[1]
        if rest in hits:  # "Ask Nadia" opening a sentence, "Nadia" elsewhere: the name is "Nadia"
            gone = hits.pop(name)
            hits[rest].count += gone.count
            hits[rest].first = min(hits[rest].first, gone.first)
            kinds[rest] += kinds[name]
            mid_sentence.add(rest)
    out = []
    for name, hit in hits.items():
        acronym = name.isupper() and " " not in name
        shape = bool(_ORG_SUFFIX.search(name) or re.search(r"[a-z][A-Z]|\d", name) or name in speaker_set
                     or name in _GAZETTEER or " " in name or _PROJECT.search(name))
        if (name not in mid_sentence and not shape) or (acronym and (hit.count < 2 or len(name) > 6)):
            continue
        if " " not in name and name.lower() in lowercase and not shape:
            continue
        hit.kind = min(kinds[name], key=_KIND_PRIORITY.index)
        out.append(hit)
    out.sort(key=lambda h: (h.name.isupper(), -h.count, h.first, h.name))
    return out


def _not_name(word: str, drop: frozenset[str]) -> bool:
    if _ORG_SUFFIX.search(word):  # "Ltd" is a stopword for tags, but part of "Smith & Sons Ltd"
        return False
    return word in drop or word.lower() in STOPWORDS or word.lower() in {"of", "de", "la", "van", "von", "&"}


_KIND_PRIORITY = ("person", "org", "project", "product", "place", "other")


def _kind(name: str, before: str, after: str, speakers: set[str]) -> str:
    if name in speakers or name.split()[0] in speakers:
        return "person"
    if _ORG_SUFFIX.search(name):
        return "org"
    if _PROJECT.search(name):
        return "project"
    if _PRODUCT_AFTER.match(after) or re.search(r"[a-z][A-Z]|\d", name):
        return "product"
    if _PLACE_SUFFIX.search(name) or name in _GAZETTEER:
        return "place"
    if _PERSON_BEFORE.search(before) or _PERSON_AFTER.match(after):
        return "person"
    if _PLACE_BEFORE.search(before):
        return "place"
    return "other"


# ------------------------------------------------------------------------------------------------
# Sentence features and key phrases
# ------------------------------------------------------------------------------------------------

_SELF_STATEMENT = re.compile(r"^\W*(?:\w+,\s*)?(?:I|I'm|I've|I'll|We|We'll|We're|My)\b")


def lexical_score(text: str, by_assistant: bool) -> float:
    """Rule bonuses and penalties added to a sentence's centrality. Why each: specific sentences (names,
    numbers, content words, a speaker's own facts and plans) make summaries; greetings, praise, questions,
    fragments and photo captions do not."""
    n_words = len(words(text))
    informative = len(content_words(re.sub(r"\[[^\]]*\]", " ", text)))
    found = cue(text)
    score = 0.025 * min(informative, 8)
    score += 0.08 if re.search(r"(?<=\w )[A-Z][a-z]", text) else 0.0
    score += 0.06 if has_number(text) else 0.0
    score += 0.08 if not by_assistant and _SELF_STATEMENT.match(text) else 0.0
    score += 0.1 if found and found[0] in ("decision", "commitment") else 0.0
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
    """Up to ``limit`` lowercase key phrases from (sentence, centrality) pairs: runs of content words,
    scored by frequency weighted by centrality, boosted when the transcript capitalises them
    mid-sentence (places, products). A longer phrase replaces a shorter one it covers when it
    accounts for at least half of its uses ("team plan" over "team")."""
    lowered = {normalise(n).lower() for n in names}
    proper = {w.lower() for text, _ in sentences for w in re.findall(r"(?<=\w[ ,])([A-Z][a-z]+)", text)}
    score: dict[str, float] = defaultdict(float)
    tf: Counter[str] = Counter()
    for text, centrality in sentences:
        weight = 0.5 + max(centrality, 0.0)
        for run in _runs(text, lowered):
            for n in (1, 2, 3):
                for k in range(len(run) - n + 1):
                    phrase = " ".join(run[k : k + n])
                    tf[phrase] += 1
                    boost = 1.5 if any(w in proper for w in run[k : k + n]) else 1.0
                    score[phrase] += weight * boost * (1.0, 1.6, 1.8)[n - 1]
    candidates = [p for p in score if (" " in p and tf[p] >= 2) or (" " not in p and not p.endswith(("ed", "ly")))]
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
            ok = (3 <= len(low) <= 20 and low not in STOPWORDS and not low.isdigit() and not has_cjk(low)
                  and any(ch.isalpha() for ch in low)
                  and not any(name.startswith(low) for name in names))  # "Mel" for Melanie
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
