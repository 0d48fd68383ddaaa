"""Audits: evaluations on k-fold chunks, contamination rates, the dataset-level test, data checks."""
