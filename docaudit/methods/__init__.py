"""Membership scores computed from TokenStats and texts: the meta-classifier, sequence-level detectors, their
document-level aggregation and the model-free blind baseline."""
