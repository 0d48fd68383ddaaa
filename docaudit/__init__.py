"""docaudit: was this document in the training data of this language model?"""

__version__ = "0.1.0"
