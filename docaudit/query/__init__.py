"""Querying a target model: model loading, windows, per-token statistics (TokenStats) and their cache."""
