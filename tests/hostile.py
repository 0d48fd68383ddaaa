"""A real OpenAI-compatible server on 127.0.0.1 that can misbehave on purpose: it answers ``/v1/models``,
``/tokenize`` (vLLM's) and echo ``/v1/completions`` with the local tokenizer's tokens and a fixed log-probability,
or, per ``mode``, NaN, infinities, HTML, a JSON list, no choices, strings, lists of unequal lengths, a body cut
short, silence, a trickle, or a models list that is not one;
``/v1/chat/completions`` is answered with ``chat_answer`` (or, per ``mode``, the same misbehaviours, no text, or
20 MB); a top-n request (the logit-bias search) is answered with a token that never gives way to the one searched.
With ``poison`` set, only a prompt containing that text gets the mode's answer. Every request is recorded (path
and Authorization header); every wait is bounded."""

from __future__ import annotations

import json
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_WAIT = 30.0  # seconds any misbehaving answer may hold a connection


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes, kind: str = "application/json", length: int | None = None):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, data, status: int = 200, headers: dict | None = None):
        body = json.dumps(data).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/v1/models" and self.server.mode in ("retry-after-models", "busy-models"):
            wait = "3600" if self.server.mode == "retry-after-models" else "0.5"
            self._json({"error": "busy"}, 429 if wait == "3600" else 503, {"Retry-After": wait})
        elif self.path == "/v1/models":
            self._json({"data": "tiny"} if self.server.mode == "models" else {"data": [{"id": "tiny"}]})
        else:
            self._json({"error": "not found"}, 404)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        tokenizer = self.server.tokenizer
        if self.path == "/tokenize":
            return self._json({"tokens": tokenizer(body["prompt"])["input_ids"]})
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            return self._json({"error": "not found"}, 404)
        mode = self.server.mode
        if mode == "retry-after-completions":
            return self._json({"error": "slow down"}, 429, {"Retry-After": "3600"})
        if mode == "fail-one":
            with self.server.lock:
                first, self.server.refused = not self.server.refused, True
            if first:
                return self._json({"error": "no such thing"}, 404)
            mode = "silent"
        if mode == "silent":
            self.server.stop.wait(MAX_WAIT)
            return
        if mode == "trickle":
            answer = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"choices": '
            start = time.monotonic()
            for byte in answer:
                if self.server.stop.wait(1.0) or time.monotonic() - start > MAX_WAIT:
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            return
        if mode == "html":
            return self._send(200, b"<html><body>Welcome</body></html>", "text/html")
        if mode == "list":
            return self._json([1, 2, 3])
        if mode == "nochoices":
            return self._json({"choices": []})
        if mode == "cut":
            self._send(200, b'{"choices": [', length=5000)
            self.close_connection = True
            return
        if mode == "status":
            return self._json({"error": "no such thing"}, 404)
        if mode == "flood":  # a 20 MB answer, declared as such
            return self._send(200, b'{"choices": [{"message": {"content": "' + b"x" * (20 << 20) + b'"}}]}')
        if self.path == "/v1/chat/completions":  # a chat answer (no log-probabilities), or none with "notext"
            content = None if mode == "notext" else self.server.chat_answer
            return self._json({"choices": [{"message": {"role": "assistant", "content": content}}]})
        if not body.get("echo"):  # a top-n request of the logit-bias search: a token that never gives way
            top = {"\u2603": -0.1, "\u2604": -3.0}
            logprobs = {"tokens": ["\u2603"], "token_logprobs": [-0.1], "top_logprobs": [top], "text_offset": [0]}
            return self._json({"choices": [{"text": "\u2603", "logprobs": logprobs}]})
        if self.server.poison is not None and self.server.poison not in body["prompt"]:
            mode = "ok"  # only prompts holding the poison get the mode's answer
        value = {"nan": float("nan"), "inf": float("-inf"), "huge": 1e308, "string": "low"}.get(mode, -1.5)
        encoded = tokenizer(body["prompt"], add_special_tokens=False, return_offsets_mapping=True)
        ids = encoded["input_ids"]
        tokens = [tokenizer.decode([i]) for i in ids] + [" x"]
        offsets = [a for a, _ in encoded["offset_mapping"]] + [len(body["prompt"])]
        values = [None] + [value] * len(ids)
        tops = [None] + [{t: value} for t in tokens[1:]]
        if mode == "short":  # one log-probability fewer than tokens
            values = values[:-1]
        logprobs = {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}
        self._send(200, json.dumps({"choices": [{"text": " x", "logprobs": logprobs}]}).encode())


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A client that hangs up (docaudit cancels the requests of a failed document) is not the server's error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def hostile_server(tokenizer, mode: str = "ok"):
    """The server on a free port of 127.0.0.1, stopped on leaving; yields it (``base``, ``mode``, ``seen``)."""
    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    server.tokenizer, server.mode, server.seen, server.stop = tokenizer, mode, [], threading.Event()
    server.poison, server.lock, server.refused = None, threading.Lock(), False
    server.chat_answer = "A"
    server.base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(10)
