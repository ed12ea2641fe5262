"""Evaluation on benchmark data: LoCoMo (jobs.eval.locomo). The data is read, never copied."""
