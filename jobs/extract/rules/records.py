"""Rules as data (issue 48): the offline extractor's rule records, read from ``rules/*.toml``.

One record per rule: its id, type, pattern, priority and vetoes, where it came from, at least two positive
examples (the first written outside the tuning data) and its negative neighbours. The engine that applies them
stays code (:mod:`jobs.extract.rules.cues`); tests/unit/test_rule_records.py runs every record's examples and
bench/rule_ledger.py counts its fires on real corpora.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from jobs.errors import ConfigError

_FRAGMENT = re.compile(r"<<(\w+)(?::(\w+)(?::(\w+))?)?>>")  # <<name>> or <<verbs:list[:form]>>
_FORMS = ("base", "s", "past", "ing", "all")
# The rule files (rules/<name>.toml) whose records the tests run and bench/rule_ledger.py counts.
RULE_FILES = ("cues", "events", "agent", "voice", "specifics", "entities")
_CONTEXTS = ("sentence", "before_name", "after_name")
# A capitalised word: where the entity rules apply beside a name (jobs/extract/rules/entities.py finds names so).
_CAPITALISED = re.compile(r"\b(?:[A-Z][\w&'-]*\w|[A-Z])\b")


@dataclass(frozen=True)
class RuleRecord:
    id: str
    name: str  # the module-level name the engine reads it by ("DECISION_LABEL")
    type: str
    priority: int
    pattern: str  # the parts joined, fragments expanded
    vetoes: tuple[str, ...]
    source: str
    positives: tuple[str, ...]
    negatives: tuple[str, ...]
    anchored: bool = False
    ignore_case: bool = True
    min_substance: int = 0
    requires: tuple[str, ...] = ()
    context: str = "sentence"  # where the engine applies the pattern: the sentence, or beside a name in it

    @property
    def compiled(self) -> re.Pattern[str]:
        return _compile(self.pattern, self.ignore_case)

    def fires(self, text: str) -> bool:
        """The pattern alone fires on ``text`` (matched at its start when anchored, else searched). A rule about the
        words before (after) a name fires when it does on the text before (after) one of the capitalised words."""
        if self.context == "before_name":
            return any(self.compiled.search(text[: m.start()]) for m in _CAPITALISED.finditer(text))
        if self.context == "after_name":
            return any(self.compiled.match(text[m.end() :]) for m in _CAPITALISED.finditer(text))
        return bool(self.compiled.match(text) if self.anchored else self.compiled.search(text))


@cache
def _compile(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE if ignore_case else 0)


def _expand(parts: list[str], fragments: dict[str, str], where: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m.group(1) == "verbs" and m.group(2):
            return verb_alternation(m.group(2), m.group(3) or "base", where)
        if m.group(1) not in fragments or m.group(2):
            raise ConfigError(f"{where}: unknown fragment {m.group()}; define it under [fragments]")
        return _FRAGMENT.sub(one, fragments[m.group(1)])  # a fragment may hold <<verbs:...>>

    return _FRAGMENT.sub(one, "".join(parts))


def verb_alternation(name: str, form: str, where: str = "jobs/extract/rules") -> str:
    """``<<verbs:name:form>>``: the verb list ``name`` of ``rules/words.toml`` as a regex group, each verb in ``form``
    (base, s, past, ing, or all four), its forms from [verb_forms]."""
    if form not in _FORMS:
        raise ConfigError(f"{where}: <<verbs:{name}:{form}>>: the form is one of {', '.join(_FORMS)}")
    forms: dict[str, list[str]] = _words_file().get("verb_forms", {})
    out: list[str] = []
    for verb in word_list(name):
        if form != "base" and verb not in forms:
            raise ConfigError(f"{where}: the verb {verb!r} of [{name}] has no forms; add it to [verb_forms]")
        found = [verb] if form == "base" else forms[verb] if form == "all" else [forms[verb][_FORMS.index(form)]]
        out += [w for k, w in enumerate(found) if w not in out and w not in found[:k]]
    return "(?:" + "|".join(re.escape(w) for w in out) + ")"


@cache
def load(name: str) -> tuple[RuleRecord, ...]:
    """The records of ``rules/<name>.toml``, checked: unique ids, two positives, a negative, a valid pattern."""
    raw = tomllib.loads(resources.files("jobs.extract.rules").joinpath(f"{name}.toml").read_text("utf-8"))
    return parse(raw, f"jobs/extract/rules/{name}.toml")


def parse(raw: dict[str, Any], path: str) -> tuple[RuleRecord, ...]:
    """The records of one parsed rule file (``path`` for the errors), checked as :func:`load` says."""
    fragments: dict[str, str] = raw.get("fragments", {})
    out: list[RuleRecord] = []
    for k, rec in enumerate(raw["rule"]):
        where = f"{path} rule {k + 1} ({rec.get('id', '?')})"
        if len(rec.get("positives", ())) < 2 or not rec.get("negatives"):
            raise ConfigError(f"{where}: a rule needs at least two positives and one negative example")
        if rec.get("context", "sentence") not in _CONTEXTS:
            raise ConfigError(f"{where}: context is one of {', '.join(_CONTEXTS)}, not {rec['context']!r}")
        record = RuleRecord(
            id=rec["id"],
            name=rec["name"],
            type=rec["type"],
            priority=rec["priority"],
            pattern=_expand(rec["pattern"], fragments, where),
            vetoes=tuple(rec["vetoes"]),
            source=rec["source"],
            positives=tuple(rec["positives"]),
            negatives=tuple(rec["negatives"]),
            anchored=rec.get("anchored", False),
            ignore_case=rec.get("ignore_case", True),
            min_substance=rec.get("min_substance", 0),
            requires=tuple(rec.get("requires", ())),
            context=rec.get("context", "sentence"),
        )
        try:
            _compile(record.pattern, record.ignore_case)
        except re.error as exc:
            raise ConfigError(f"{where}: the pattern does not compile ({exc}); fix the record") from exc
        out.append(record)
    ids = [r.id for r in out]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{path}: rule ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    return tuple(out)


def by_name(name: str) -> dict[str, RuleRecord]:
    """The records of ``rules/<name>.toml`` by their engine name."""
    return {r.name: r for r in load(name)}


@cache
def _words_file() -> dict[str, Any]:
    return tomllib.loads(resources.files("jobs.extract.rules").joinpath("words.toml").read_text("utf-8"))


@cache
def word_map(name: str) -> dict[str, str]:
    """The word table ``name`` of ``rules/words.toml`` (a ``map`` of word to word: "have" -> "has")."""
    table = _words_file().get(name)
    if not isinstance(table, dict) or not isinstance(table.get("map"), dict):
        raise ConfigError(f"jobs/extract/rules/words.toml: no table [{name}] with a map; add it there")
    return dict(table["map"])


def alternation(name: str) -> str:
    """The word list ``name`` as a regex group, ``(?:a|b|c)``, each word escaped, in the list's order."""
    return "(?:" + "|".join(re.escape(w) for w in word_list(name)) + ")"


@cache
def word_list(name: str) -> tuple[str, ...]:
    """The shared word list ``name`` of ``rules/words.toml`` (one definition per concept). A derived list names its
    ``base`` list and says what it leaves out (``minus``) and adds (``plus``): it is derived here, never copied."""
    raw = _words_file()
    if name not in raw or not isinstance(raw[name], dict):
        raise ConfigError(f"jobs/extract/rules/words.toml: no list [{name}]; add it there")
    table = raw[name]
    if "base" not in table:
        return tuple(table["words"])
    base = word_list(table["base"])
    missing = [w for w in table.get("minus", ()) if w not in base]
    if missing or "words" in table:
        raise ConfigError(
            f"jobs/extract/rules/words.toml [{name}]: a derived list has no words of its own and leaves out only "
            f"words of its base [{table['base']}] (not {missing}); fix the list"
        )
    return tuple([w for w in base if w not in table.get("minus", ())] + list(table.get("plus", ())))
