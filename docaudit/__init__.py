"""docaudit: was this document in the training data of this language model?"""

from __future__ import annotations

__version__ = "0.2.0"
