"""The HTTP client of an OpenAI-compatible server (``query/backends/openai.py``): requests bounded in time and size
(``docaudit.net``), retried with backoff, counted and capped; every answer checked before use (a JSON object, a
completion, log-probabilities that are finite numbers at most 0). The API key is never logged, cached or written."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx

from docaudit import net
from docaudit.config import ModelConfig
from docaudit.errors import DocauditError, ModelError
from docaudit.query.stats import NonFiniteStats

log = logging.getLogger(__name__)

RETRY_STATUS = (408, 409, 429, 500, 502, 503, 504)


class Cancelled(ModelError):
    """A request stopped because another request of the same document failed."""


MAX_LOGPROB = 1e-3  # a log-probability above this (log p <= 0, with room for rounding) is a malformed answer
MAX_ABS_LOGPROB = 1e30  # below -1e30 a value is not finite in float32, as the statistics are kept


@dataclass
class ApiClient:
    """Requests to one served model: JSON over HTTP (httpx, pooled), each request bounded as a whole by
    ``api_timeout`` seconds (``docaudit.net``), retried ``api_retries`` times with exponential backoff (a 429's
    ``Retry-After`` honoured when it leaves the retries and the document their time, else the call fails at once)
    after a failed connection, a timeout or a 408/409/429/5xx answer, within the time left to the current document
    or to loading (``api_document_timeout``, :meth:`bounded`); a cap on the requests of a run, and a count of the
    requests made. Every answer is checked (status, content type, JSON object): anything else is a one-line error naming
    the URL."""

    base: str
    model: str | None
    config: ModelConfig
    vocab_size: int = 0
    max_positions: int | None = None
    mode: str = "echo"
    llama_cpp_server: bool = False
    fingerprint: str = ""
    requests: int = 0
    deadline: float | None = None  # time.monotonic() by which the current document must be done
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False)  # set: stop every request
    _key: str | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _http: object = field(default=None, repr=False)

    def _count(self) -> None:
        with self._lock:
            cap = self.config.max_requests
            if cap is not None and self.requests >= cap:
                raise DocauditError(f"--max-requests {cap} reached: finished documents are cached; raise it to go on")
            self.requests += 1

    def _left(self, url: str, attempt: int) -> float:
        """Seconds the next request to ``url`` may take: ``api_timeout``, at most what is left to the document."""
        if self.cancelled.is_set():
            raise Cancelled(f"the request to {url} was cancelled")
        if self.deadline is None:
            return self.config.api_timeout
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DocauditError(
                f"{self._budget()} were spent before the request to {url}"
                + (f" could be tried again ({attempt} tries)" if attempt else "")
            )
        return min(self.config.api_timeout, left)

    def call(
        self, path: str, body: dict | None = None, root: bool = False, max_bytes: int = net.MAX_ANSWER_BYTES
    ) -> dict:
        """POST ``body`` (GET without one) to ``path`` under the API base (under the server's root with ``root``)
        and return the JSON object answered (at most ``max_bytes`` long). Connection errors, timeouts and
        408/409/429/5xx answers are retried."""
        url = (self.base.rsplit("/v1", 1)[0] if root else self.base) + path
        headers = {"Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        if self._http is None:
            with self._lock:
                if self._http is None:
                    self._http = net.client(connections=max(1, self.config.api_concurrency))
        delay, retries = self.config.api_backoff, self.config.api_retries
        # the retries' own deadline: every try taking its whole --api-timeout, with the backoff between them
        give_up = time.monotonic() + (retries + 1) * self.config.api_timeout + delay * (2**retries - 1)
        for attempt in range(retries + 1):
            timeout = self._left(url, attempt)
            self._count()
            wait = delay
            try:
                answer = net.request(
                    self._http,
                    "GET" if body is None else "POST",
                    url,
                    timeout,
                    max_bytes,
                    cancelled=self.cancelled,
                    json=body,
                    headers=headers,
                )
            except net.Timeout:
                problem = f"the server at {url} gave no complete answer within {round(timeout, 1):g} s (--api-timeout)"
            except net.Cancelled as e:
                raise Cancelled(str(e)) from None
            except net.Unacceptable as e:
                raise ModelError(f"the server at {url}: {e}") from None
            except httpx.HTTPError as e:
                problem = f"cannot reach {url}: {_describe(e)}"
            else:
                if answer.status == 200:
                    return _json_object(answer, url)
                problem = f"the server at {url} answered {answer.status}: {_detail(answer)}"
                if answer.status not in RETRY_STATUS:
                    raise ModelError(problem)
                asked = _retry_after(answer)
                if asked is not None and time.monotonic() + asked > give_up:
                    raise ModelError(
                        f"{problem}; it asks to wait {asked:g} s before trying again (Retry-After), more than "
                        f"--api-timeout {self.config.api_timeout:g} and --api-retries {retries} allow"
                    )
                wait = delay if asked is None else asked
            if attempt == retries:
                break
            if self.deadline is not None and time.monotonic() + wait >= self.deadline:
                raise ModelError(f"{problem}; {self._budget()} do not leave time to try again")
            log.info("request to %s failed (%s); retrying in %.1f s", url, problem, wait)
            if self.cancelled.wait(wait):
                raise Cancelled(f"the request to {url} was cancelled")
            delay *= 2
        tries = f"{retries + 1} tries" if retries else "1 try"
        raise ModelError(f"{problem} ({tries}; --api-retries {retries})")

    def resolve_model(self) -> dict:
        """Ask the server for its models: the one to use (``model``, or the only one served) checked to be among
        them, and its entry's ``fingerprint``; returns the entry."""
        listed = self.call("/models").get("data", [])
        if not isinstance(listed, list) or not all(
            isinstance(m, dict) and isinstance(m.get("id"), str) for m in listed
        ):
            raise DocauditError(
                f"the server at {self.base}/models answered no list of models with ids (data: {show(listed)})"
            )
        served = [m["id"] for m in listed]
        if self.model is None:
            if len(served) != 1:
                raise DocauditError(
                    f"the server serves {len(served)} models; name one with --api-model ({', '.join(served)})"
                )
            self.model = served[0]
        elif served and self.model not in served:
            raise ModelError(f"the server does not serve '{self.model}' (it serves {', '.join(served)})")
        entry = next((m for m in listed if m.get("id") == self.model), {})
        self.fingerprint = hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:16]
        return entry

    def _budget(self) -> str:
        return f"the {self.config.api_document_timeout:g} s allowed per document (--api-document-timeout)"

    @contextmanager
    def bounded(self):
        """Every request of the block within ``api_document_timeout`` seconds together (when set), and cancelled
        when the block fails: a request in flight stops, a retry waiting gives up, none starts."""
        budget = self.config.api_document_timeout
        self.deadline = None if budget is None else time.monotonic() + budget
        self.cancelled = threading.Event()
        try:
            yield self
        except BaseException:
            self.cancelled.set()
            raise
        finally:
            self.deadline = None

    def complete(self, prompt: str, **options) -> dict:
        """One completion of at most one token at temperature 0, with the penalties a llama.cpp server would add
        switched off: the answer's first choice, checked to be a JSON object."""
        body = {"model": self.model, "prompt": prompt, "max_tokens": 1, "temperature": 0, **options}
        if self.llama_cpp_server:
            body |= {"repeat_penalty": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0}
        answer = self.call("/completions", body)
        choices = answer.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise DocauditError(
                f"the server at {self.base}/completions answered without a completion (choices: {show(choices)})"
            )
        logprobs = choices[0].get("logprobs")
        if logprobs is not None and not isinstance(logprobs, dict):
            raise DocauditError(
                f"the server at {self.base}/completions answered logprobs as {type(logprobs).__name__}, not an object"
            )
        return choices[0]


def show(value) -> str:
    """A value from an answer, shortened for an error message."""
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(error: Exception) -> str:
    """An httpx error in a few words."""
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, httpx.RemoteProtocolError):
        return f"the connection was closed before the answer was complete ({text})"
    return text[:300]


def _json_object(answer, url: str) -> dict:
    """The JSON object of a 200 answer; anything else is a one-line error naming the URL."""
    if answer.content_type is not None and answer.content_type != "application/json":
        raise DocauditError(f"the server at {url} answered {answer.content_type}, not JSON")
    try:
        data = json.loads(answer.content)
    except (ValueError, RecursionError) as e:
        problem = str(e).splitlines()[0][:100]
        raise DocauditError(f"the server at {url} answered with invalid JSON ({problem})") from None
    if not isinstance(data, dict):
        raise DocauditError(f"the server at {url} answered a JSON {type(data).__name__}, not an object")
    return data


def top_logprobs(choice: dict) -> dict[str, float]:
    """The top log-probabilities of a completion's first generated token (empty when it generated nothing)."""
    top = (choice.get("logprobs") or {}).get("top_logprobs") or [{}]
    return top[0] if isinstance(top, list) and isinstance(top[0], dict) else {}


def _detail(answer) -> str:
    try:
        data = json.loads(answer.content)
        detail = (
            (data.get("detail") or data.get("error") or answer.content.decode(errors="replace"))
            if isinstance(data, dict)
            else answer.content.decode(errors="replace")
        )
    except (ValueError, RecursionError):
        detail = answer.content.decode(errors="replace") or "no detail"
    return " ".join(str(detail).split())[:300]


def _retry_after(answer) -> float | None:
    try:
        value = float(answer.headers.get("Retry-After"))
    except (TypeError, ValueError):
        return None
    return value if 0 <= value < math.inf else None


def logprob(value, url: str, what: str) -> float:
    """A log-probability from the server at ``url``: a finite number at most 0 (``MAX_LOGPROB`` for rounding),
    else a one-line error saying ``what`` it was."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DocauditError(f"the server at {url} answered {show(value)} as the log-probability of {what}")
    if not math.isfinite(value) or value < -MAX_ABS_LOGPROB:
        raise NonFiniteStats(
            f"the server at {url} answered the log-probability {value!r} for {what}: not a finite number"
        )
    if value > MAX_LOGPROB:
        raise DocauditError(
            f"the server at {url} answered the log-probability {value!r} for {what}: not a finite number at most 0"
        )
    return float(value)


def split_url(spec: str) -> tuple[str, str | None]:
    """``http://HOST:PORT/v1#NAME`` as the API base and the model name (None when not given)."""
    base, _, name = spec.partition("#")
    return base.rstrip("/"), name or None
