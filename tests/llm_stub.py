"""A scripted LLM server on loopback that speaks just enough of two APIs for the real SDKs.

``POST /v1/messages`` answers like the Anthropic Messages API and ``POST /v1/chat/completions``
like OpenAI chat completions. Each test queues the replies it wants (a summary, a 429, a 529, a
500, a reply slower than the client's timeout, a prompt-too-long 400, a malformed body) and then
reads back every request the server received, body and headers. Nothing here leaves 127.0.0.1.

The SDKs retry by themselves, so one summary call can reach the stub several times: each
request's ``x-stainless-retry-count`` header (``Received.retry_count``) says which attempt it was.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"


@dataclass
class Reply:
    """One scripted answer; rendered for whichever API the request came in on."""

    kind: str  # ok | rate_limited | overloaded | server_error | prompt_too_long | malformed | error
    text: str = ""
    input_tokens: int = 1000
    output_tokens: int = 200
    cache_read_tokens: int = 0
    retry_after: float | None = None
    delay: float = 0.0
    status: int = 200
    raw: str | None = None  # malformed: the literal body to send
    message: str = ""  # error: the error message
    actual_tokens: int = 210_000  # prompt_too_long numbers
    limit_tokens: int = 200_000


@dataclass
class Received:
    """A request the stub saw."""

    path: str
    headers: dict[str, str]  # names lower-cased: the two SDKs spell them differently
    body: Any

    @property
    def retry_count(self) -> int | None:
        """The SDK's retry counter on this request (0 on a call's first attempt)."""
        value = self.headers.get("x-stainless-retry-count")
        return int(value) if value is not None else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


@dataclass
class LLMStub:
    """The server plus its script; ``start()`` binds port 0 on 127.0.0.1."""

    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Received] = field(default_factory=list)
    #: what to answer when the queue is empty (None: a non-retryable 400 that names the problem)
    default: Reply | None = None
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ---------------------------------------------------------------- script helpers
    def ok(self, text: str, **kw: Any) -> LLMStub:
        self.replies.append(Reply("ok", text=text, **kw))
        return self

    def rate_limited(self, retry_after: float | None = None) -> LLMStub:
        self.replies.append(Reply("rate_limited", status=429, retry_after=retry_after))
        return self

    def overloaded(self) -> LLMStub:
        self.replies.append(Reply("overloaded", status=529))
        return self

    def server_error(self, status: int = 500) -> LLMStub:
        self.replies.append(Reply("server_error", status=status))
        return self

    def slow(self, delay: float, text: str = "too late") -> LLMStub:
        self.replies.append(Reply("ok", text=text, delay=delay))
        return self

    def prompt_too_long(self, actual: int = 210_000, limit: int = 200_000) -> LLMStub:
        self.replies.append(
            Reply("prompt_too_long", status=400, actual_tokens=actual, limit_tokens=limit)
        )
        return self

    def malformed(self, raw: str = "<html>upstream proxy error</html>") -> LLMStub:
        self.replies.append(Reply("malformed", raw=raw))
        return self

    def error(self, status: int, message: str) -> LLMStub:
        self.replies.append(Reply("error", status=status, message=message))
        return self

    # ---------------------------------------------------------------- server
    @property
    def url(self) -> str:
        assert self._server is not None, "stub not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> LLMStub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in two writes; with Nagle on, the body waits for the
            # client's delayed ACK (about 40 ms on Linux), which real API servers do not add
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with stub._lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    stub.requests.append(Received(self.path, headers, body))
                    reply = stub.replies.popleft() if stub.replies else stub.default
                status, headers, payload = stub.render(self.path, body, reply)
                if reply is not None and reply.delay:
                    # not time.sleep: tests replace it to record the SDKs' back-off sleeps
                    threading.Event().wait(reply.delay)
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away: that was the point

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # a short poll interval keeps shutdown() (one per test) from adding half a second each
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # ---------------------------------------------------------------- rendering
    def render(
        self, path: str, body: Any, reply: Reply | None
    ) -> tuple[int, dict[str, str], bytes]:
        openai = path.rstrip("/").endswith("/chat/completions")
        if path.rstrip("/") not in (ANTHROPIC_PATH, OPENAI_PATH):
            return _json(404, _error(openai, "not_found_error", f"stub: no route {path}"))
        if reply is None:
            return _json(400, _error(openai, "invalid_request_error", "stub: no scripted reply"))
        model = body.get("model", "stub-model") if isinstance(body, dict) else "stub-model"
        if reply.kind == "ok":
            return _json(200, _success(openai, model, reply))
        if reply.kind == "rate_limited":
            status, headers, payload = _json(
                429,
                _error(
                    openai,
                    "rate_limit_error",
                    "Number of request tokens has exceeded your rate limit",
                ),
            )
            if reply.retry_after is not None:
                headers["retry-after"] = f"{reply.retry_after:g}"
            return status, headers, payload
        if reply.kind == "overloaded":
            return _json(529, _error(openai, "overloaded_error", "Overloaded"))
        if reply.kind == "server_error":
            return _json(reply.status, _error(openai, "api_error", "Internal server error"))
        if reply.kind == "prompt_too_long":
            if openai:
                message = (
                    f"This model's maximum context length is {reply.limit_tokens} tokens. However, "
                    f"your messages resulted in {reply.actual_tokens} tokens."
                )
                return _json(
                    400, _error(True, "invalid_request_error", message, "context_length_exceeded")
                )
            message = (
                f"prompt is too long: {reply.actual_tokens} tokens > {reply.limit_tokens} maximum"
            )
            return _json(400, _error(False, "invalid_request_error", message))
        if reply.kind == "malformed":
            payload = (reply.raw or "").encode()
            return 200, {"content-type": "application/json"}, payload
        if reply.kind == "error":
            return _json(reply.status, _error(openai, "invalid_request_error", reply.message))
        raise ValueError(f"unknown reply kind {reply.kind!r}")


def _json(status: int, data: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"content-type": "application/json"}, json.dumps(data).encode()


def _error(openai: bool, etype: str, message: str, code: str | None = None) -> dict[str, Any]:
    if openai:
        return {"error": {"message": message, "type": etype, "param": None, "code": code}}
    return {"type": "error", "error": {"type": etype, "message": message}}


def _success(openai: bool, model: str, reply: Reply) -> dict[str, Any]:
    if openai:
        return {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": reply.input_tokens,
                "completion_tokens": reply.output_tokens,
                "total_tokens": reply.input_tokens + reply.output_tokens,
                "prompt_tokens_details": {"cached_tokens": reply.cache_read_tokens},
            },
        }
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": reply.text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "cache_read_input_tokens": reply.cache_read_tokens,
            "cache_creation_input_tokens": 0,
        },
    }
