"""Helpers of scripts/studies/study_dose_response.py: the exposure-grouped continued pretraining and the per-cell
evaluation."""
