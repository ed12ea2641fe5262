"""Evaluation on benchmark data (docs/evaluation.md): LoCoMo (jobs.eval.locomo) and coding sessions
(jobs.eval.coding: sde-bench and our Claude Code questions), each beside the raw-message baseline
(jobs.eval.baseline). The data is read from ../shared, never copied."""
