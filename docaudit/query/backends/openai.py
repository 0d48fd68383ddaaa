"""The OpenAI-compatible HTTP backend: a model behind ``/v1/completions`` (vLLM, llama.cpp's or llama-cpp-python's
server, TGI, hosted APIs), asked for the log-probabilities of each window's tokens.

Two ways, chosen by ``ModelConfig.api_logprobs`` (``auto`` asks the server once):

- ``echo``: one request per window, the window's text as the prompt with ``echo`` and ``logprobs=1``: the server
  returns every prompt token's log-probability and its top one.
- ``logit_bias``: for servers that give only the top-n log-probabilities of a generated token. Per scored
  position, one request for the top n after the prefix; when the true token is not among them, the bias on it that
  just makes it the greedy choice is searched by bisection (PAC, Ye et al. 2024, sec. 4.4 and appendix D): at that
  bias ``gamma`` its logit equals the top token's, so ``log p(u) = log p(top) - gamma``.

Only log p and log p_max are available this way (``register_backend`` below). The tokens queried are the local
tokenizer's (``--api-tokenizer``, or ``--model``), checked against the server's tokenize endpoint on loading; each
window's text must tokenize back to the window's tokens, and echoed tokens are checked against them, so a mismatch
is an error, never a silent misalignment. The API key is read from the environment variable named by
``api_key_env`` and is never logged, cached or written into outputs (the client: ``api_client.py``)."""

from __future__ import annotations

import logging
import math
import os
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import replace

import numpy as np

from docaudit.config import API_LOGPROBS, ModelConfig
from docaudit.errors import DocauditError, ModelError
from docaudit.query.backends.api_client import ApiClient, Cancelled, logprob, show, split_url, top_logprobs
from docaudit.query.backends.base import TOKENIZER_PROBE, Backend, Unaskable, register_backend, stats_from_rows
from docaudit.query.lazy import torch
from docaudit.query.loaded import LoadedModel, tokenizer_hash
from docaudit.query.sources import check_identity, gguf_tokenizer, resolve_source
from docaudit.query.stats import TokenStats, bos_per_window, scored_spans

log = logging.getLogger(__name__)

ALIGN_TOKENS = 8  # how far a span sent as text may grow to tokenize back to its tokens

BIAS_LIMIT = 100.0  # the largest logit bias OpenAI's API accepts; a token needing more is reported at this bound


def load_api(config: ModelConfig, expected_identity: str | None = None) -> LoadedModel:
    """A LoadedModel for a served model: the server is asked for its models (and the one to use checked), its
    tokenizer compared with the local one on a probe text, and, with ``api_logprobs="auto"``, whether it echoes
    prompt log-probabilities."""
    base, model_name = config.api_base, config.api_model
    spec = config.model
    if spec is not None and spec.startswith(("http://", "https://")):
        base, from_url = split_url(spec)
        model_name = model_name or from_url
        spec = None
    if not base:
        raise DocauditError("--backend openai needs the server: --api-base http://HOST:PORT/v1 (or --model URL)")
    if expected_identity is not None and expected_identity.startswith("openai:"):
        expected_base = expected_identity.removeprefix("openai:").rsplit("#", 1)[0]
        if base.rstrip("/") != expected_base:  # refused before any request
            check_identity(f"openai:{base.rstrip('/')}#{model_name or '?'}", expected_identity)
    if config.api_logprobs not in API_LOGPROBS:
        raise DocauditError(f"unknown --api-logprobs '{config.api_logprobs}' (choose from {', '.join(API_LOGPROBS)})")
    key = None
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise DocauditError(f"the environment variable {config.api_key_env} (--api-key-env) is not set")
    client = ApiClient(base.rstrip("/"), model_name, config, _key=key)
    tokenizer = _tokenizer(config.api_tokenizer or spec)
    with client.bounded():
        return _load(client, config, tokenizer, expected_identity)


def _load(client: ApiClient, config: ModelConfig, tokenizer, expected_identity: str | None) -> LoadedModel:
    """What :func:`load_api` asks the server, all within ``api_document_timeout`` when set."""
    client.resolve_model()
    client.vocab_size = len(tokenizer)
    _check_tokenizer(client, tokenizer)
    client.mode = _logprobs_mode(client, tokenizer) if config.api_logprobs == "auto" else config.api_logprobs
    if client.mode == "echo" and _shifted_echo(client, tokenizer):
        raise DocauditError(
            "llama-cpp-python's server misaligns echoed log-probabilities for a model without a BOS token: "
            "use --api-logprobs logit_bias"
        )
    identity = f"openai:{client.base}#{client.model}"
    check_identity(identity, expected_identity)
    resolved = replace(config, api_base=client.base, api_model=client.model)
    return LoadedModel(client, tokenizer, identity, tokenizer_hash(tokenizer), resolved, torch.device("cpu"))


def _tokenizer(spec: str | None):
    """The local tokenizer matching the server's model: an HF folder, a hub id or a ``.gguf`` file."""
    if spec is None:
        raise DocauditError(
            "--backend openai needs the served model's tokenizer: --api-tokenizer (HF folder, hub id or .gguf)"
        )
    from transformers import AutoTokenizer

    source = resolve_source(spec)
    if source.gguf is not None:
        return gguf_tokenizer(source.gguf, source.identity.rsplit("@", 1)[1])
    try:
        return AutoTokenizer.from_pretrained(source.location())
    except (OSError, ValueError) as e:
        raise ModelError(f"cannot load the tokenizer '{spec}': {e}") from e


def _check_tokenizer(client: ApiClient, tokenizer) -> None:
    """Compare the local tokenizer with the server's on a probe text, through the server's tokenize endpoint
    (llama-cpp-python's ``/extras/tokenize`` or vLLM's ``/tokenize``) when it has one."""
    ours = tokenizer(TOKENIZER_PROBE)["input_ids"]
    for path, body, answer in (
        ("/extras/tokenize", {"input": TOKENIZER_PROBE}, "tokens"),
        ("/tokenize", {"model": client.model, "prompt": TOKENIZER_PROBE}, "tokens"),
    ):
        try:
            theirs = client.call(path, body, root=True)[answer]
        except (DocauditError, KeyError, TypeError):
            continue
        if not isinstance(theirs, list):
            continue
        client.llama_cpp_server = path == "/extras/tokenize"
        if list(theirs) != list(ours):
            raise DocauditError(
                "the local tokenizer does not tokenize as the server does (checked on a probe text): name the "
                "served model's tokenizer with --api-tokenizer"
            )
        return
    log.warning("the server has no tokenize endpoint: the local tokenizer is assumed to be the served model's")


def _shifted_echo(client: ApiClient, tokenizer) -> bool:
    """Whether the server's echo would be shifted by one token: llama-cpp-python pairs each echoed token with the
    distribution after it when the prompt does not start with a BOS (its ``_create_completion``)."""
    return client.llama_cpp_server and bos_per_window(tokenizer) is None


def _logprobs_mode(client: ApiClient, tokenizer) -> str:
    """``echo`` when the server returns prompt log-probabilities correctly aligned, else ``logit_bias``."""
    if _shifted_echo(client, tokenizer):
        return "logit_bias"
    try:
        lp = client.complete(TOKENIZER_PROBE, echo=True, logprobs=1).get("logprobs") or {}
    except DocauditError:
        return "logit_bias"
    values = lp.get("token_logprobs") or []
    return "echo" if isinstance(values, list) and sum(v is not None for v in values) > 2 else "logit_bias"


def requests_per_window(mode: str, scored: int, tolerance: float) -> int:
    """Requests for one window of ``scored`` positions at most: one (echo), or per position one or two for the
    top n (two when the greedy choice ends the completion), one at the largest bias and at most
    ``ceil(log2(BIAS_LIMIT / tolerance))`` for the bisection (logit_bias)."""
    if mode == "echo":
        return 1
    return scored * (3 + math.ceil(math.log2(BIAS_LIMIT / tolerance)))


class OpenAIBackend(Backend):
    """Windows of the local tokenizer's tokens sent as text, log-probabilities read back and checked."""

    name = "openai"

    def __init__(self, client: ApiClient, tokenizer, vocab_size: int):
        self.client, self.tokenizer, self.vocab_size = client, tokenizer, vocab_size
        self.floored = 0  # positions whose true token did not win even at BIAS_LIMIT

    @property
    def requests(self) -> int:
        return self.client.requests

    def identity(self) -> dict:
        c = self.client
        return {"backend": self.name, "server": c.base, "served": c.model, "entry": c.fingerprint, "mode": c.mode}

    def batch_size(self, context: int) -> int:
        return 1

    def release_buffers(self) -> None:
        pass

    def estimate(self, n_tokens: int, context: int, stride: int) -> int:
        """Requests needed (at most) for a document of ``n_tokens`` tokens."""
        spans = scored_spans(n_tokens, context, stride)
        tol = self.client.config.api_bias_tolerance
        return sum(requests_per_window(self.client.mode, e - f, tol) for _, f, e in spans)

    def _text(self, ids: np.ndarray, start: int, end: int, grow_right: bool = True) -> tuple[str, int, int]:
        """The text to send for ``ids[start:end]`` and the span ``(start', end')`` it stands for: a window cut
        inside a word may tokenize differently on its own, so the span grows, by at most ``ALIGN_TOKENS`` tokens
        each way, to the left (the rest of its first word: a little more context) and, with ``grow_right``, to the
        right (after every scored token: no effect on them), until its text tokenizes back to exactly its tokens.
        Otherwise the server cannot be asked for exactly these tokens: an error."""
        for left in range(min(ALIGN_TOKENS, start) + 1):
            for right in range(min(ALIGN_TOKENS, len(ids) - end) + 1 if grow_right else 1):
                span = ids[start - left : end + right].tolist()
                text = self.tokenizer.decode(span)
                if self.tokenizer(text, add_special_tokens=False)["input_ids"] == span:
                    return text, start - left, end + right
        raise Unaskable(
            f"the text of tokens {start}..{end - 1} does not tokenize back to them, so the server cannot be asked for "
            "exactly them: use an in-process backend (--backend transformers or llamacpp)"
        )

    def compute(
        self, ids: np.ndarray, context: int, stride: int, bos: int | None, gp: bool, batch_size: int | None = None
    ) -> TokenStats:
        """The document's statistics, within ``api_document_timeout`` seconds when set (the first failed window
        cancels the others); ``floored`` counts the log-probabilities that are only bounds."""
        spans = scored_spans(len(ids), context, stride)
        work = self._echo if self.client.mode == "echo" else self._search
        floored_before = self.floored
        pool = ThreadPoolExecutor(self.client.config.api_concurrency)
        try:
            with self.client.bounded():
                futures = [pool.submit(work, ids, *span) for span in spans]
                wait(futures, return_when=FIRST_EXCEPTION)
                if any(f.done() and f.exception() is not None for f in futures):
                    self.client.cancelled.set()  # the others stop; the first window that failed (in order) is told
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise next(e for f in futures if not f.cancelled() and _failed(e := f.exception()))
                parts = [f.result() for f in futures]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        rows = np.full((sum(len(p) for p in parts), 4), np.nan, dtype=np.float32)
        rows[:, :2] = np.concatenate(parts)
        stats = stats_from_rows(ids, rows, None, self.vocab_size, context, stride)
        stats.floored = self.floored - floored_before
        return stats

    def _echo(self, ids: np.ndarray, start: int, first: int, end: int) -> np.ndarray:
        """(log p, log p_max) of tokens ``first..end-1`` from one echo request over ``ids[start:end]``."""
        text, start, stop = self._text(ids, start, end)
        values, tops = self.echoed(text, ids[start:stop], 1)
        out = np.empty((end - first, 2), dtype=np.float32)
        for row, j in enumerate(range(first - start, end - start)):
            if tops[j] is None:
                url = f"{self.client.base}/completions"
                raise DocauditError(f"the server at {url} returned no log-probability for prompt token {j}")
            best = max(tops[j].values())
            out[row] = values[j], max(best, values[j])
        return out

    def prompt_top(self, ids: np.ndarray, width: int, suffix: int, top_n: int) -> tuple[np.ndarray, np.ndarray]:
        """For the last ``suffix`` of the ``width`` tokens ``ids[:width]`` (sent as text, the BOS the server's own),
        what the server returns of each position from one echo request with ``logprobs=top_n``: a row of the
        log-probabilities it lists (the true token's added when it is not among them, −inf after), float32
        [suffix, top_n + 1], and the count it listed per position; the true token is column 0."""
        text, _, stop = self._text(ids, 0, width)
        values, tops = self.echoed(text, ids[:stop], top_n)
        rows = np.full((suffix, top_n + 1), -np.inf, dtype=np.float32)
        counts = np.empty(suffix, dtype=np.int64)
        for row, j in enumerate(range(width - suffix, width)):
            listed = sorted(tops[j].values(), reverse=True)
            if values[j] in listed:
                listed.remove(values[j])  # the true token is listed: kept once, in column 0
            listed = listed[:top_n]
            rows[row, 0], rows[row, 1 : len(listed) + 1] = values[j], listed
            counts[row] = len(tops[j])
        return rows, counts

    def echoed(self, text: str, window: np.ndarray, top_n: int) -> tuple[list[float], list[dict]]:
        """One echo request for ``text`` (the tokens ``window``) with ``logprobs=top_n``: each prompt token's
        log-probability and its top list (token text to log-probability), checked: the echo is the window's tokens,
        and every value a log-probability."""
        url = f"{self.client.base}/completions"
        lp = self.client.complete(text, echo=True, logprobs=top_n).get("logprobs") or {}
        tokens, values, tops = lp.get("tokens") or [], lp.get("token_logprobs") or [], lp.get("top_logprobs") or []
        offsets = lp.get("text_offset") or []
        for name, value in (("tokens", tokens), ("token_logprobs", values), ("top_logprobs", tops)):
            if not isinstance(value, list):
                raise DocauditError(f"the server at {url} answered {name} as {show(value)}, not a list")
        if not isinstance(offsets, list):
            offsets = []
        n = len(window)
        # the echo is the prompt's tokens followed by what was generated (at least one token, more when a server
        # goes on past tokens without text): the first n must be the window's, and the next must start after it
        if (
            len(values) < n
            or len(tokens) != len(values)
            or len(tops) != len(values)
            or (len(offsets) > n and offsets[n] != len(text))
        ):
            raise DocauditError(
                f"the server at {url} echoed its prompt as other tokens than the window's {n} ({len(tokens)} tokens, "
                f"{len(values)} log-probabilities, {len(tops)} top lists): its tokenization differs from the local "
                "tokenizer's (--api-tokenizer), or the answer is malformed"
            )
        for j in range(n):
            mine = self.tokenizer.decode([int(window[j])])
            if not isinstance(tokens[j], str):
                raise DocauditError(f"the server at {url} answered {show(tokens[j])} as a token, not a string")
            if "\ufffd" not in mine and tokens[j] and mine != tokens[j]:
                raise DocauditError(
                    f"the server echoed token {tokens[j]!r} where the window has {mine!r}: its tokenization differs "
                    "from the local tokenizer's (--api-tokenizer)"
                )
        checked, listed = [None] * n, [None] * n
        for j in range(1, n):  # the first token has no log-probability (nothing before it)
            if values[j] is None or not isinstance(tops[j], dict) or not tops[j]:
                raise DocauditError(f"the server at {url} returned no log-probability for prompt token {j}")
            checked[j] = logprob(values[j], url, f"prompt token {j}")
            listed[j] = {str(k): logprob(v, url, f"a top token at prompt token {j}") for k, v in tops[j].items()}
        return checked, listed

    def _search(self, ids: np.ndarray, start: int, first: int, end: int) -> np.ndarray:
        """(log p, log p_max) of tokens ``first..end-1``, each from its own top-n request and bias search."""
        out = np.empty((end - first, 2), dtype=np.float32)
        for row, t in enumerate(range(first, end)):
            out[row] = self._token(self._text(ids, start, t, grow_right=False)[0], int(ids[t]))
        return out

    def _token(self, prefix: str, target: int) -> tuple[float, float]:
        """(log p, log p_max) of ``target`` after ``prefix``: read from the top n when it is there, else
        ``log p(ref) - gamma``, with ``ref`` the greedy choice (the "known token" of PAC's appendix D) and
        ``gamma`` the bias at which ``target`` just replaces it, bisected to ``api_bias_tolerance``."""
        tolerance = self.client.config.api_bias_tolerance
        choice, suppress = self._top(prefix), {}
        eos = self.tokenizer.eos_token_id
        if not top_logprobs(choice) and eos is not None:  # the greedy choice ended the completion: suppress the end
            suppress = {str(eos): -BIAS_LIMIT}
            choice = self._top(prefix, logit_bias=suppress)
        top = top_logprobs(choice)
        url = f"{self.client.base}/completions"
        if not top:
            raise DocauditError(f"the server at {url} returned no top log-probabilities (logprobs)")
        top = {k: logprob(v, url, f"the top token {k!r}") for k, v in top.items()}
        best = max(top.values())
        word = self.tokenizer.decode([target])
        if word in top:
            return top[word], best
        chosen = choice["logprobs"].get("token_logprobs")
        if not isinstance(chosen, list) or not chosen:
            raise DocauditError(f"the server at {url} answered no token_logprobs for the generated token")
        ref = logprob(chosen[0], url, "the generated token")
        lo, hi = max(0.0, ref - min(top.values())), BIAS_LIMIT
        if not self._wins(prefix, target, word, hi, suppress):
            self.floored += 1
            return ref - hi, best
        while hi - lo > tolerance:
            mid = (lo + hi) / 2
            if self._wins(prefix, target, word, mid, suppress):
                hi = mid
            else:
                lo = mid
        return ref - (lo + hi) / 2, best

    def _top(self, prefix: str, **options) -> dict:
        """The greedy completion of one token after ``prefix`` with the top ``api_top_n`` log-probabilities."""
        return self.client.complete(prefix, logprobs=self.client.config.api_top_n, **options)

    def _wins(self, prefix: str, target: int, word: str, bias: float, suppress: dict) -> bool:
        """Whether ``target`` is the greedy next token after ``prefix`` with ``bias`` added to its logit (and the
        tokens of ``suppress`` suppressed, as when its reference was chosen)."""
        choice = self.client.complete(prefix, logit_bias={**suppress, str(target): bias}, logprobs=1)
        tokens = (choice.get("logprobs") or {}).get("tokens") or [""]
        if not isinstance(tokens, list):
            raise DocauditError(f"the server at {self.client.base}/completions answered tokens as {show(tokens)}")
        return tokens[0] == word  # the first generated token (a server may go on past tokens without text)


register_backend(
    "openai",
    provides=("logp", "max_logp"),
    load=load_api,
    open=lambda lm, query: OpenAIBackend(lm.model, lm.tokenizer, lm.vocab_size),
    options=(
        "api_base",
        "api_model",
        "api_key_env",
        "api_tokenizer",
        "api_logprobs",
        "api_top_n",
        "api_bias_tolerance",
        "api_concurrency",
        "api_timeout",
        "api_retries",
        "api_backoff",
        "max_requests",
        "api_document_timeout",
    ),
    help="an OpenAI-compatible server (echoed prompt log-probabilities, or a logit-bias search)",
)


def _failed(error: BaseException | None) -> bool:
    """Whether a window's request failed on its own (not cancelled because another one failed)."""
    return error is not None and not isinstance(error, Cancelled)
