"""Presenting results: tables, plots, and the files each command writes."""
