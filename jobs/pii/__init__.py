"""Personal data found in text and replaced by typed placeholders before a model reads it.

:mod:`~jobs.pii.redaction` runs the detectors (one module per family: credentials, addresses, payment,
phones, on the shared :mod:`~jobs.pii.detector`) and resolves overlaps. The user's rights over what is held
(forget, export, correct) are :mod:`jobs.rights`. Submodules are imported where they are used.
"""
