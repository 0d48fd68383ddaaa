"""A byte-level BPE tokenizer trained on the fly (lab targets, tests, benchmarks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from docaudit.errors import DocauditError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

SPECIAL_TOKEN = "<|endoftext|>"


def train_tokenizer(
    texts: list[str], vocab_size: int, special: str = SPECIAL_TOKEN, add_bos: bool = True, pad: bool = True
) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on ``texts`` with one special token ``special`` (id 0) that is the BOS and
    EOS token (and, with ``pad``, the padding token). With ``add_bos``, encoding a text puts the BOS token in front
    (as Llama's and Gemma's tokenizers do), so the first real token of a document is predicted from it. Every byte
    is in the alphabet: no unknown tokens."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    if not texts:
        raise DocauditError("cannot train a tokenizer on an empty pool of documents")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[special],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer, length=len(texts))
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{special} $A",
            pair=f"{special} $A {special} $B:1",
            special_tokens=[(special, tok.token_to_id(special))],
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=special, eos_token=special, pad_token=special if pad else None
    )
