"""Text written by a model for the generation-only probes: an OpenAI-compatible server's ``/chat/completions`` or
``/completions`` (no log-probabilities asked), or a causal model run in this process (``generate.continuations``).

Every request goes through the scoring backend's client (``backends/api_client.py``): the server only at the
address the user named (no default, nothing sent elsewhere), each request bounded as a whole by ``--api-timeout``,
retried (a ``Retry-After`` longer than the retries allow is an error, not a wait), all of one text's requests within
``--api-document-timeout``, ``--max-requests`` counted, each answer at most ``answer_bytes`` long and checked (a
JSON object with a first choice whose text is a string). Each answer is kept in the cache folder as a
``generations`` entry (``generations/<64 hex>.json``), keyed by the model's identity, the endpoint, the prompt and
the sampling settings with the sample's seed, so a run stopped half way asks again only for what it lacks."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from docaudit.config import ModelConfig
from docaudit.errors import DocauditError
from docaudit.io import atomic_write_text
from docaudit.query.backends.api_client import ApiClient, show
from docaudit.query.cache import cache_root
from docaudit.query.cache_entries import FOLDERS
from docaudit.query.loaded import LoadedModel
from docaudit.untrusted import load_untrusted_json

CACHE_FORMAT = 1
ANSWER_BYTES_BASE = 1 << 16  # an answer's bytes beyond its text's: the JSON around it
ANSWER_BYTES_PER_TOKEN = 256  # a generated token's most bytes, JSON escapes included


@dataclass(frozen=True)
class Ask:
    """One prompt to write after: at most ``max_tokens`` tokens, ``samples`` times at ``temperature`` (sample
    ``i`` drawn with the sampling seed ``draw + i``, derived from the run's seed)."""

    prompt: str
    samples: int
    max_tokens: int
    temperature: float
    draw: int


def answer_bytes(max_tokens: int) -> int:
    """The longest answer accepted for a completion of at most ``max_tokens`` tokens."""
    return ANSWER_BYTES_BASE + ANSWER_BYTES_PER_TOKEN * max_tokens


@dataclass
class Writer:
    """A model that writes text: ``identity`` (what the cache keys hold), ``endpoint`` (``chat``, ``completions``
    or ``in-process``), the requests it sent and the entries it found cached."""

    identity: str
    endpoint: str
    client: ApiClient | None = None
    model: LoadedModel | None = None
    batch_size: int = 16
    sent: int = 0
    cached: int = 0
    generated_tokens: int = 0
    prompt_tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _path(self, ask: Ask, sample: int):
        key = {
            "format": CACHE_FORMAT,
            "model": self.identity,
            "endpoint": self.endpoint,
            "prompt": ask.prompt,
            "max_tokens": ask.max_tokens,
            "temperature": ask.temperature,
            "seed": ask.draw + sample,
        }
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
        return cache_root() / FOLDERS["generations"] / f"{digest}.json"

    def _cached(self, ask: Ask, sample: int) -> str | None:
        """The text of a cache entry, or None when it is missing or damaged (a miss)."""
        try:
            data = load_untrusted_json(self._path(ask, sample), "generations entry")
            text = data["text"] if data.get("format") == CACHE_FORMAT and data.get("model") == self.identity else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None
        return text if isinstance(text, str) else None

    def _store(self, ask: Ask, sample: int, text: str) -> None:
        path = self._path(ask, sample)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"format": CACHE_FORMAT, "model": self.identity, "text": text}))

    def write(self, asks: list[Ask]) -> list[list[str]]:
        """Per ask, its samples' texts: from the cache, else written now (and cached one by one as they come)."""
        out = [[self._cached(a, i) for i in range(a.samples)] for a in asks]
        self.cached += sum(t is not None for row in out for t in row)
        missing = [(k, i) for k, row in enumerate(out) for i, t in enumerate(row) if t is None]
        if not missing:
            return out
        if self.client is not None:
            self._write_served(asks, missing, out)
        else:
            self._write_in_process(asks, missing, out)
        return out

    def _write_served(self, asks: list[Ask], missing: list[tuple[int, int]], out: list) -> None:
        def one(item):
            k, i = item
            text = self._request(asks[k], asks[k].draw + i)
            self._store(asks[k], i, text)
            out[k][i] = text

        with self.client.bounded(), ThreadPoolExecutor(max(1, self.client.config.api_concurrency)) as pool:
            list(pool.map(one, missing))

    def _request(self, ask: Ask, seed: int) -> str:
        """One completion from the server, its text checked to be a string."""
        body = {"model": self.client.model, "max_tokens": ask.max_tokens, "temperature": ask.temperature, "seed": seed}
        if self.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": ask.prompt}]
        else:
            body["prompt"] = ask.prompt
        path = "/chat/completions" if self.endpoint == "chat" else "/completions"
        answer = self.client.call(path, body, max_bytes=answer_bytes(ask.max_tokens))
        with self._lock:
            self.sent += 1
        choices = answer.get("choices")
        first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        text = (first.get("message") or {}).get("content") if self.endpoint == "chat" and first else None
        if self.endpoint == "completions" and first:
            text = first.get("text")
        if not isinstance(text, str):
            raise DocauditError(
                f"the server at {self.client.base}{path} answered without a text (choices: {show(choices)})"
            )
        usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
        tokens, prompt = usage.get("completion_tokens"), usage.get("prompt_tokens")
        with self._lock:  # the server's own counts, where it gives sensible ones
            self.generated_tokens += tokens if isinstance(tokens, int) and 0 <= tokens <= ask.max_tokens else 0
            self.prompt_tokens += prompt if isinstance(prompt, int) and 0 <= prompt <= len(body_text(body)) else 0
        return text

    def _write_in_process(self, asks: list[Ask], missing: list[tuple[int, int]], out: list) -> None:
        """Pure sampling of exactly ``max_tokens`` tokens per sample (``generate.continuations``), one prompt at a
        time, its samples together."""
        from docaudit.query.generate import continuations

        tok = self.model.tokenizer
        for k in sorted({k for k, _ in missing}):
            ask = asks[k]
            if not ask.temperature > 0:
                raise DocauditError("a model run in this process samples: give a --temperature above 0")
            ids = list(tok(ask.prompt, add_special_tokens=False).input_ids)
            options = {"temperature": ask.temperature, "seed": ask.draw, "batch_size": self.batch_size}
            [rows] = continuations(self.model, [ids], ask.samples, ask.max_tokens, options)
            self.generated_tokens += ask.samples * ask.max_tokens
            for i, row in enumerate(rows):
                text = tok.decode(row, skip_special_tokens=True, clean_up_tokenization_spaces=False)
                self._store(ask, i, text)
                out[k][i] = text


def body_text(body: dict) -> str:
    """The text a request sends (its prompt or its messages' contents), for bounding the token counts answered."""
    return body.get("prompt") or "".join(m["content"] for m in body.get("messages", []))


def served_writer(config: ModelConfig, endpoint: str) -> Writer:
    """A writer for the server the user named (``--api-base``; the model ``--api-model``, or the only one it
    serves), asked once for its models; the key from the environment variable ``--api-key-env`` names."""
    if not config.api_base:
        raise DocauditError("the probe needs the server: --api-base http://HOST:PORT/v1 (nothing is sent elsewhere)")
    key = None
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise DocauditError(f"the environment variable {config.api_key_env} (--api-key-env) is not set")
    client = ApiClient(config.api_base.rstrip("/"), config.api_model, config, _key=key)
    with client.bounded():
        client.resolve_model()
    identity = f"openai:{client.base}#{client.model}@{client.fingerprint}"
    return Writer(identity, endpoint, client=client)


def in_process_writer(lm: LoadedModel) -> Writer:
    """A writer for a causal model run in this process (its continuations sampled, never greedy)."""
    from docaudit.query.generate import require_in_process

    require_in_process(lm, "the probed model")
    return Writer(f"{lm.identity}|{lm.tokenizer_hash}", "in-process", model=lm)
