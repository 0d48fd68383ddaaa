"""ReCaLL's separator: docaudit puts a blank line between the non-member prefix and the text; the authors' code
(ruoyuxie/recall ``src/run.py``) joins the prefix's and the text's token ids with nothing between. This measures
the difference on the lab target of the tests (tests/labtarget.py: a tiny GPT-2 trained on a random half of
10-word book excerpts; one non-member excerpt is the prefix): the AUC of both scores, their mean relative
difference and their rank correlation, on the texts that fit one window with the prefix.

    python scripts/checks/recall_separator.py      (from the repository root; needs DOCAUDIT_CORPUS)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))


def main() -> None:
    import reference as ref
    from labtarget import tiny_target
    from scipy.stats import spearmanr
    from sklearn.metrics import roc_auc_score

    from docaudit.config import DetectorConfig, ModelConfig, QueryConfig
    from docaudit.methods.detectors.detector import build_detector
    from docaudit.methods.detectors.recall import PREFIX_SEPARATOR, recall_problem
    from docaudit.query.models import load_model

    model_dir, members, nonmembers = tiny_target()
    cut = [" ".join(t.split()[:10]) for t in members + nonmembers]
    lm = load_model(ModelConfig(model=str(model_dir)))
    tok = lm.tokenizer
    mem, non = cut[: len(members)], cut[len(members) :]
    prefix, non = non[0], non[1:]
    det = build_detector(lm, QueryConfig(), ["recall"], DetectorConfig(recall_prefix=prefix), single_pass=250)
    mem, non = ([t for t in texts if recall_problem(det, t) is None] for texts in (mem, non))
    with_sep = [det.score_text(x)["recall"] for x in mem + non]
    joined_ids = ref.token_ids(tok, prefix)
    authors = [ref.recall(lm.model, joined_ids, ref.token_ids(tok, x), tok.bos_token_id) for x in mem + non]
    a, b, y = np.array(with_sep), np.array(authors), [1] * len(mem) + [0] * len(non)
    print(
        json.dumps(
            {
                "members": len(mem),
                "nonmembers": len(non),
                "auc_blank_line": roc_auc_score(y, a),
                "auc_authors_no_separator": roc_auc_score(y, b),
                "mean_relative_difference": float(np.mean(np.abs(a - b) / np.abs(b))),
                "max_relative_difference": float(np.max(np.abs(a - b) / np.abs(b))),
                "spearman": float(spearmanr(a, b)[0]),
                "separator": PREFIX_SEPARATOR,
            }
        )
    )


if __name__ == "__main__":
    main()
