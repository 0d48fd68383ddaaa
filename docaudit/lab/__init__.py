"""Controlled experiments: targets trained on a random half of a pool."""
