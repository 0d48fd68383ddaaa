"""Shared fixtures: tiny models built from configs with a BPE tokenizer trained on the fly (no downloads)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

_CORPUS_ROOT = Path(os.environ.get("DOCAUDIT_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus"))


class _Corpus:
    """The shared corpus of real books (``../shared/corpus`` beside the repository, or ``$DOCAUDIT_CORPUS``).

    A test that reads it (``CORPUS / "members"``, ``corpus_text``, ``corpus_ids`` and the fixtures built on them) is
    skipped, with the reason, where the corpus is absent, so a plain clone still runs every test that builds its own
    texts."""

    root = _CORPUS_ROOT

    @staticmethod
    def present() -> bool:
        return (_CORPUS_ROOT / "catalog.csv").is_file()

    def __truediv__(self, part) -> Path:
        if not self.present():
            pytest.skip(f"needs the book corpus at {_CORPUS_ROOT} (set DOCAUDIT_CORPUS to its location)")
        return _CORPUS_ROOT / part

    def __fspath__(self) -> str:
        return str(self / "")

    __str__ = __fspath__


CORPUS = _Corpus()


def corpus_text(group: str, book_id: str, start: int = 20000, n_chars: int = 4000) -> str:
    """A slice of a real book from the shared corpus (read by path, never copied)."""
    raw = (CORPUS / group / f"{book_id}.txt").read_text(encoding="utf-8")
    return raw[start : start + n_chars]


def corpus_ids(group: str, n: int) -> list[str]:
    return sorted(p.stem for p in (CORPUS / group).glob("*.txt"))[:n]


def make_tokenizer(texts: list[str], vocab_size: int = 512, add_bos: bool = False):
    """A byte-level BPE tokenizer with special token ``<s>``; with ``add_bos`` it starts every encoding with it (as
    Llama's does)."""
    from docaudit.lab.tokenizer import train_tokenizer

    return train_tokenizer(texts, vocab_size, special="<s>", add_bos=add_bos, pad=False)


def make_model(
    tmp: Path, arch: str = "gpt2", vocab_size: int = 512, texts=None, seed: int = 0, width: int = 32
) -> Path:
    """Save a tiny randomly initialised causal LM with its tokenizer as a local HF directory."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    texts = texts or [corpus_text("members", b) for b in corpus_ids("members", 4)]
    tokenizer = make_tokenizer(texts, vocab_size, add_bos=arch == "llama")
    torch.manual_seed(seed)
    if arch == "gpt2":
        model = GPT2LMHeadModel(
            GPT2Config(
                vocab_size=len(tokenizer),
                n_positions=256,
                n_embd=width,
                n_layer=2,
                n_head=2,
                bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        )
    else:
        model = LlamaForCausalLM(
            LlamaConfig(
                vocab_size=len(tokenizer),
                hidden_size=width,
                intermediate_size=2 * width,
                num_hidden_layers=2,
                num_attention_heads=2,
                num_key_value_heads=1,
                max_position_embeddings=256,
                bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        )
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    return tmp


def pytest_configure(config):
    """Every cache write of the session, session- and module-scoped fixtures' included (a model loaded once records
    its load time), goes to a folder of the session's, never to the user's cache."""
    import tempfile

    config._docaudit_cache = tempfile.TemporaryDirectory(prefix="docaudit-tests-cache-")
    os.environ["DOCAUDIT_CACHE"] = config._docaudit_cache.name


def pytest_unconfigure(config):
    held = getattr(config, "_docaudit_cache", None)
    if held is not None:
        held.cleanup()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCAUDIT_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="session")
def tiny_gpt2(tmp_path_factory) -> Path:
    return make_model(tmp_path_factory.mktemp("gpt2"), "gpt2")


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    return make_model(tmp_path_factory.mktemp("llama"), "llama")


@pytest.fixture(scope="module")
def tokenizer(tiny_gpt2):
    """The tiny GPT-2's tokenizer (what a test server answers with)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_gpt2)


@pytest.fixture
def doc(tmp_path) -> Path:
    """One short book excerpt in its own file."""
    path = tmp_path / "book.txt"
    path.write_text(corpus_text("members", corpus_ids("members", 1)[0], n_chars=600))
    return path


def within(seconds: float, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a thread, failing the test (instead of hanging it) if it is still running after
    ``seconds``."""
    box = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture(scope="session")
def gpt2(tiny_gpt2):
    """The tiny GPT-2 loaded once, for the tests that score with it directly."""
    from docaudit.config import ModelConfig
    from docaudit.query.models import load_model

    return load_model(ModelConfig(model=str(tiny_gpt2)))


def shelf_of(root: Path, folders: dict[str, tuple[str, int]], n_chars: int = 1200) -> dict[str, Path]:
    """Per folder name, ``(group, n)``: ``n`` book slices of ``n_chars`` from that group of the shared corpus, in
    ``root/name``."""
    dirs = {}
    for name, (group, n) in folders.items():
        d = root / name
        d.mkdir()
        for book in corpus_ids(group, n):
            (d / f"{book}.txt").write_text(corpus_text(group, book, n_chars=n_chars))
        dirs[name] = d
    return dirs


def document_sets(root: Path, n: int = 4, n_chars: int = 1200) -> dict[str, Path]:
    """``n`` member and ``n`` non-member book slices from the shared corpus, in ``root/mem`` and ``root/non``."""
    return shelf_of(root, {"mem": ("members", n), "non": ("nonmembers", n)}, n_chars)


@pytest.fixture(scope="session")
def trained(tmp_path_factory, tiny_gpt2) -> Path:
    """A classifier trained once (on ``document_sets`` of the tiny GPT-2, with its own statistics cache so no test's
    cache holds its entries), for the tests that predict with one or edit copies of it."""
    from docaudit.cli import main

    dirs = document_sets(tmp_path_factory.mktemp("trained-sets"))
    out = tmp_path_factory.mktemp("models") / "tiny"
    args = ["train", "--members", dirs["mem"], "--nonmembers", dirs["non"], "--model", tiny_gpt2, "--out", out]
    args += ["--context", "16", "--trees", "20", "--bins", "20", "--norm", "max_tf", "--features", "hist"]
    args += ["--folds", "2"]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DOCAUDIT_CACHE", str(tmp_path_factory.mktemp("trained-cache")))
        result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def one_thread():
    """Torch on one thread for a module's tests: tiny models run far faster so on a shared, busy machine."""
    from labtarget import single_thread

    with single_thread():
        yield


def results_of(output: str) -> dict:
    """A JSON output's results: the output without its envelope (the command and the time differ between runs)."""
    from docaudit.provenance import ENVELOPE_KEYS

    return {k: v for k, v in json.loads(output).items() if k not in ENVELOPE_KEYS}
