"""Membership statistics that need only the text a model writes, no probability of a given text: n-gram coverage
of sampled continuations (``ngram.py``) and DE-COP's multiple-choice accuracy (``decop.py``)."""
