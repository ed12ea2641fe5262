"""Text rules for the offline extractor (:mod:`jobs.extract.offline`), one module per concern.

Everything here is plain regular expressions and word lists, with no model and no state, so the
offline extractor stays deterministic and fast. The rules are deliberately conservative: when a
rule is unsure it declines (returns ``None``) and the caller falls back to something safe, such as
quoting the speaker verbatim, rather than writing a wrong or ungrammatical sentence.

- :mod:`~jobs.extract.rules.text`: normalising, sentence splitting, words, stopwords, language hints.
- :mod:`~jobs.extract.rules.voice`: first person to third person ("I'll send it" -> "Dana will send it").
- :mod:`~jobs.extract.rules.cues`: event cue phrases (decision, commitment, surprise) and chat patterns.
- :mod:`~jobs.extract.rules.dates`: due dates from phrases such as "by Friday" or "in 2 weeks".
- :mod:`~jobs.extract.rules.entities`: names from capitalisation, with a kind from their context.
- :mod:`~jobs.extract.rules.salience`: a sentence's rule score, lexical centrality, and key phrases.
- :mod:`~jobs.extract.rules.specifics`: a specific (number, code span, identifier, name, quoted value, day), once.

The word lists and patterns are data: `cues.toml`, `events.toml`, `agent.toml`, `voice.toml`, `specifics.toml`,
`entities.toml` (one record per rule, with examples) and `words.toml` (shared word lists: numbers, change verbs and
the lists derived from them, stopwords, the calendar, the entity, voice, action and grounding tables), read by
:mod:`~jobs.extract.rules.records`.
"""
