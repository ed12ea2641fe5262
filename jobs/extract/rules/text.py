"""Normalising and splitting text: sentences, words, stopwords, and hints about case and language."""

from __future__ import annotations

import re
from collections.abc import Iterable

from jobs.extract.rules.records import by_name, word_list

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

DIGIT = by_name("specifics")["DIGIT"].compiled  # a number's one sign (jobs/extract/rules/specifics.py)

# Spelled numbers, their position their value: the one definition (rules/words.toml).
NUMBER_WORDS: tuple[str, ...] = word_list("numbers")

_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
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
    """A digit anywhere (rules/specifics.toml specific.digit)."""
    return bool(DIGIT.search(text))


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
