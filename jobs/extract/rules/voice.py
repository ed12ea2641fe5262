"""First person to third person: "I'll send it by Friday" becomes "Dana will send it by Friday".

Only a speaker's own I/me/my is rewritten; anything ambiguous (we, you, a compound subject, a verb
with no safe conjugation) declines, and :func:`attribute` quotes the speaker instead.
"""

from __future__ import annotations

import re

from jobs.extract.rules.cues import DECISION_LABEL
from jobs.extract.rules.records import alternation, by_name, word_list, word_map
from jobs.extract.rules.text import content_words, normalise, shouting

_RULES = by_name("voice")  # the patterns below are data: jobs/extract/rules/voice.toml
# Openers dropped before rewriting or quoting: "Yeah I ..." needs no comma; "so", "well", "thanks"
# and the like only count when punctuated ("So far, so good" keeps its "So"); a greeting may carry
# a vocative ("Hey Jon, my store ..." -> "my store ...").
INTERJECTION = _RULES["INTERJECTION"].compiled

# The word lists are data too (rules/words.toml): whose sentence it is, and how its verb agrees with a name.
_OTHER_PRONOUNS = re.compile(r"\b" + alternation("other_pronouns") + r"\b", re.IGNORECASE)  # we, you, our ...
_FIRST_PERSON = re.compile(r"\b" + alternation("first_person") + r"\b", re.IGNORECASE)  # I, me, my ...
_ADVERBS = frozenset(word_list("adverbs"))  # skipped on the way to the verb
_KEEP_VERB = frozenset(word_list("same_in_third_person"))  # past tenses, modals: identical in the third person
_PRESENT_ED = frozenset(word_list("present_ed"))  # "need", "embed": present tenses though they end in -ed
_NOT_VERB = frozenset(word_list("not_verbs"))
_SPECIAL_3RD = word_map("third_singular")  # "have" -> "has"
_PLURAL = word_map("plural_after_i")  # "was" -> "were" after "they"


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
        return _PLURAL.get(low, verb)
    return "is" if low == "am" else _third_singular(verb)


_COMPOUND_SUBJECT = _RULES["COMPOUND_SUBJECT"].compiled  # "My girlfriend and I had ..."


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
        if tok in ("I", "I'm", "I've", "I'll", "I'd"):  # the first subject is the name, later ones "they"
            step = _subject(tokens, i, "they" if named else label, singular=not named)
            if step is None:
                return None
            words, i = step
            out.extend(words)
            named = True
        else:
            out.append(_object(tok, label, named))
            named = named or tok.lower() in _NAMES_THE_SPEAKER
            i += 1
    return _finish("".join(out).strip(), label)


# The first-person words after which the speaker has been named (later ones become "they", "them", "their").
_OBJECTS = word_map("object_pronouns")  # "me" -> "them" (rules/words.toml)
_FIRST_MENTION = word_map("first_mention")  # "my" -> the name + "'s", the first time
_NAMES_THE_SPEAKER = frozenset(_FIRST_MENTION)
# "I'd" + these reads "would"; "I'd been" reads "had"; anything else is unsure.
_WOULD_AFTER = frozenset(word_list("would_after"))


def _subject(tokens: list[str], i: int, subject: str, singular: bool) -> tuple[list[str], int] | None:
    """The words that replace the subject token ``tokens[i]`` (I, I'm, I've, I'll, I'd) and the index after
    them; None when unsure. A bare "I" takes its verb along, made to agree with the new subject."""
    tok = tokens[i]
    if tok == "I'm":
        return [f"{subject} {'is' if singular else 'are'}"], i + 1
    if tok == "I've":
        return [f"{subject} {'has' if singular else 'have'}"], i + 1
    if tok == "I'll":
        return [f"{subject} will"], i + 1
    if tok == "I'd":
        nxt = _next_word(tokens, i)
        if nxt == "been":
            return [f"{subject} had"], i + 1
        return ([f"{subject} would"], i + 1) if nxt in _WOULD_AFTER else None
    j, verb = _verb_after(tokens, i)  # bare I: find the verb (skipping adverbs) and make it agree
    new = None if verb is None else _agree(verb, singular)
    if new is None:
        return None
    return [subject, *tokens[i + 1 : j], new], j + 1


def _object(tok: str, label: str, named: bool) -> str:
    """me/my/mine/myself in the third person: the label the first time the speaker is named, then they."""
    low = tok.lower()
    if low not in _OBJECTS:
        return tok
    if named or low not in _FIRST_MENTION:
        return _OBJECTS[low]
    return label + _FIRST_MENTION[low]


def _finish(result: str, label: str) -> str | None:
    if label not in result:
        return None
    if label.startswith("The "):  # "By the way, the user went ..." mid-sentence
        result = result.replace(label, label[0].lower() + label[1:])  # "the user (Dana)": a name keeps its case
    return result[0].upper() + result[1:]


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
        # a label that names what it rules on keeps it: "Revising the cache policy: 5 minutes for pricing."
        lead = m.string[: m.start(1)]
        body = m.string.strip() if set(content_words(lead)) - _LABEL_WORDS else m.group(1).strip()
        return f'{label} decided: "{body.replace(chr(34), chr(39))}"'
    rewritten = third_person(sentence, label)
    if rewritten:
        return rewritten
    original = normalise(sentence).strip()
    body = INTERJECTION.sub("", original).strip() or original
    if body != original and body[:1].islower():  # "yeah, the docs ..." -> "The docs ..."
        body = body[0].upper() + body[1:]
    return f'{label} {verb}: "{body.replace(chr(34), chr(39))}"'


# The words of a rule label that name no subject ("Amended rule, superseding the original:", "Decision made:").
_LABEL_WORDS = frozenset(word_list("label_words"))  # rules/words.toml [label_words]
_DECISION_SUBJECT = _RULES["DECISION_SUBJECT"].compiled  # "let's", "we'll just", "I've"
_DECISION_PAST = _RULES["DECISION_PAST"].compiled  # "decided", "chose", "opted", ...
_IMPERATIVE = _RULES["IMPERATIVE"].compiled  # "use", "go with", "switch to", ...
_DECISION_OPENER = _RULES["DECISION_OPENER"].compiled  # "Okay, so ..." before a decision's plain form
_CONTINUING = word_map("continuing_forms")  # "going with X" -> "decided to go with X"
_CONTINUING_WITH = re.compile("|".join(rf"{w} with\b" for w in _CONTINUING), re.IGNORECASE)


def decision_what(clause: str, label: str) -> str | None:
    """A decision's clause as "<label> decided to <what>", its object kept verbatim: "Let's use PostgreSQL 17
    for the billing service" -> "The user decided to use PostgreSQL 17 for the billing service". ``None`` when
    the clause does not start with a plain decision form (the caller quotes the sentence instead)."""
    text = _DECISION_OPENER.sub("", normalise(clause).strip()).rstrip(".!;:, ")
    if m := _DECISION_SUBJECT.match(text):
        rest = text[m.end() :]
        if _DECISION_PAST.match(rest):  # "we decided to use X", "we've agreed to ..."
            what = rest
        elif _CONTINUING_WITH.match(rest):
            what = "decided to " + _CONTINUING[rest.split()[0].lower()] + rest[len(rest.split()[0]) :]
        elif m.group(0).strip() and _IMPERATIVE.match(rest):  # "let's use X", "we'll go with Y"
            what = "decided to " + rest
        else:
            return None
    elif _IMPERATIVE.match(text):  # "Use Redis for the session cache."
        what = "decided to " + text[0].lower() + text[1:]
    else:
        return None
    if len(what.split()) < 3:
        return None
    return f"{label} {what}."
