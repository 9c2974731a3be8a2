"""The engine's message model, whatever agent wrote the transcript: blocks, messages, usage, problems.

A source adapter (``input.sources``) builds these once and then they are only read: pipeline
steps never mutate a ``Message``; they describe changes as transforms (see ``pipeline.base``).
Sessions are pickled in the session cache by these classes' module paths: moving or reshaping
one means bumping ``session_cache.CACHE_VERSION``.
"""

from __future__ import annotations

import copy
import copyreg
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal, Self, SupportsIndex


class PickledByFields:
    """Pickling (and copying) of a slotted class whose instances a session holds by the
    hundred thousand: the object is made with ``cls.__new__`` and its field values (``_FIELDS``,
    in that order) are handed to its ``extend`` (the pickle's APPENDS). The usual state, a
    tuple (or a slots dict) per object, is memoized like every object the pickler saves, so the
    pickler would hold all of them until the whole session is written (a 2 GB session's parse:
    a hundred MB and more of states and memo entries); the field values are the object's own,
    and ``copyreg.__newobj__`` with no further arguments pickles no tuple at all. ``copy``
    would hand such values to ``append`` one by one: ``__copy__`` and ``__deepcopy__`` say how
    to copy instead. (Pickle protocol 1 or later: protocol 0 appends one value at a time.)"""

    __slots__ = ()
    _FIELDS: ClassVar[tuple[str, ...]]

    def __reduce__(self) -> tuple[Any, tuple[type], None, Iterator[Any]]:
        newobj = copyreg.__newobj__  # type: ignore[attr-defined]  # (not in typeshed)
        return (newobj, (self.__class__,), None, (getattr(self, n) for n in self._FIELDS))

    def extend(self, values: Iterable[Any]) -> None:
        """Unpickling only: the fields' values, in ``_FIELDS``' order."""
        for name, value in zip(self._FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    def __copy__(self) -> Self:
        copied = self.__class__.__new__(self.__class__)
        copied.extend(getattr(self, n) for n in self._FIELDS)
        return copied

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        copied = self.__class__.__new__(self.__class__)
        memo[id(self)] = copied
        copied.extend(copy.deepcopy(getattr(self, n), memo) for n in self._FIELDS)
        return copied


BlockType = Literal[
    "text",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "tool_result",
    "image",
    "document",
    "other",
]

#: What a message is, for display and for the pipeline's rules.
MessageKind = Literal[
    "prompt",  # a user prompt typed (or queued) by a person
    "tool_result",  # a user record carrying tool_result blocks
    "meta",  # isMeta user context injected by Claude Code
    "command",  # slash-command echo / local-command output sent as user text
    "summary",  # isCompactSummary user message
    "assistant",  # one API response (all split records merged)
    "compact_boundary",
    "microcompact_boundary",
    "snip_boundary",
    "attachment",
    "collapsed",  # a context-collapse placeholder (modeled or recorded)
]


#: ``Block.data`` key of a thinking block: the length of its signature, which encrypts the whole
#: thinking (its size where the text is left out or summarized)
SIGNATURE_CHARS = "signature_chars"


#: Texts at least this long are deflated (zlib) while ``deflating`` is on, when that saves a
#: quarter or more: a session of hundreds of megabytes is mostly long tool results, which
#: deflate two to four times, and reading one back costs a millisecond a megabyte.
DEFLATE_MIN_CHARS = 4096
_deflating: ContextVar[bool] = ContextVar("deflating", default=False)


class Deflated:
    """A text's UTF-8, deflated (``compact_text``). A holder, not a ``bytes`` subclass: a
    subclass pickles through a copy of its bytes, which the pickler keeps to the end."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce__(self) -> tuple[type[Deflated], tuple[bytes]]:
        return (Deflated, (self.data,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Deflated) and other.data == self.data

    __hash__ = None  # type: ignore[assignment]


@contextmanager
def deflating(on: bool = True) -> Iterator[None]:
    """While inside, ``compact_text`` deflates long texts (a large session being parsed: it
    trades a few per cent of the parse's time for about a third of the session's memory)."""
    token = _deflating.set(on)
    try:
        yield
    finally:
        _deflating.reset(token)


def compact_text(text: str) -> str | bytes | Deflated:
    """``text`` as it costs least to hold: an ASCII ``str`` as it is (one byte a character),
    another as UTF-8 when that is smaller; a long one deflated while ``deflating`` is on. One
    non-ASCII character (the ``→`` of every Read result's line numbers) makes CPython store a
    whole string at two or four bytes a character, and tool results are most of a session's
    memory. Lone surrogates (escaped in the JSON) round-trip through ``surrogatepass``."""
    if len(text) >= DEFLATE_MIN_CHARS and _deflating.get():
        encoded = text.encode("utf-8", "surrogatepass")
        deflated = zlib.compress(encoded, 1)
        if len(deflated) * 4 <= len(encoded) * 3:
            return Deflated(deflated)
    if text.isascii():
        return text
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) >= 2 * len(text):
        return text  # mostly CJK (three UTF-8 bytes a character): the str is no bigger
    try:
        text.encode("latin-1")  # (stops at the first character past Latin-1)
    except UnicodeEncodeError:
        return encoded  # held at two or four bytes a character as a str
    return text  # Latin-1: one byte a character as a str


def expand_text(stored: str | bytes | Deflated) -> str:
    """The text ``compact_text`` kept."""
    if isinstance(stored, str):
        return stored
    if isinstance(stored, Deflated):
        stored = zlib.decompress(stored.data)
    return stored.decode("utf-8", "surrogatepass")


class Block(PickledByFields):
    """One content block as the model sees it.

    ``text`` is the text that is sent (for ``tool_use``: name + JSON of the input, which is what
    Claude Code's estimator measures); it is held compact (``compact_text``) and read back on
    each access. Token counts are filled in lazily by ``tokens``. A plain class with
    ``__slots__`` rather than a dataclass: ``text`` is a property over the compact form.
    """

    __slots__ = (
        "_text",
        "data",
        "is_error",
        "is_list",
        "key",
        "media",
        "rough",
        "tok",
        "tool_name",
        "tool_use_id",
        "type",
    )
    _FIELDS = __slots__
    #: the fields in the order of the constructor's arguments (compared, shown)
    FIELDS = (
        "type",
        "text",
        "tool_use_id",
        "tool_name",
        "is_error",
        "data",
        "media",
        "is_list",
        "tok",
        "rough",
        "key",
    )

    def __init__(
        self,
        type: BlockType,
        text: str = "",
        tool_use_id: str | None = None,
        tool_name: str | None = None,
        is_error: bool = False,
        data: Any = None,
        media: int = 0,
        is_list: bool = False,
        tok: int = -1,
        rough: int = -1,
        key: int = -1,
    ) -> None:
        self.type = type
        # (``compact_text``'s answer for a short ASCII text, the usual one, without its call)
        self._text = (
            text if len(text) < DEFLATE_MIN_CHARS and text.isascii() else compact_text(text)
        )
        self.tool_use_id = tool_use_id
        self.tool_name = tool_name
        self.is_error = is_error
        #: tool_use input (kept for display), the JSON of an unknown block, or a thinking
        #: block's ``{SIGNATURE_CHARS: n}``
        self.data = data
        #: number of image/document blocks nested in a tool_result
        self.media = media
        #: the tool_result content was a list of blocks (persisted as .json)
        self.is_list = is_list
        #: tiktoken count, filled on first use
        self.tok = tok
        #: Claude Code's rough estimate (chars/4, media 2,000), filled on first use
        self.rough = rough
        #: stable content hash for the prompt-cache model, filled on first use
        self.key = key

    @property
    def text(self) -> str:
        stored = self._text
        # (``expand_text``'s answer for a text held as it is, the usual one, without its call)
        return stored if type(stored) is str else expand_text(stored)

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in Block.FIELDS)

    def copy(self, **changes: Any) -> Block:
        """A copy with ``changes`` (as ``dataclasses.replace``); the text is not decoded."""
        block = Block.__new__(Block)
        for name in Block.__slots__:
            setattr(block, name, getattr(self, name))
        for name, value in changes.items():
            if name == "text":
                block._text = compact_text(value)
            else:
                setattr(block, name, value)
        return block

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Block:
            return NotImplemented
        assert isinstance(other, Block)
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value (as a dataclass)

    def __repr__(self) -> str:
        shown = zip(Block.FIELDS, self._fields(), strict=True)
        return f"Block({', '.join(f'{name}={value!r}' for name, value in shown)})"

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        # a Block pickled before ``PickledByFields`` (a checkpoint, a live session's
        # reading state): its slots as a tuple, or older, as a slotted dataclass
        if len(state) == 2 and state[0] is None and isinstance(state[1], dict):
            # pickled when Block was a slotted dataclass (a checkpoint, a live session's
            # reading state): its fields by name, the text a str
            self.__init__(**state[1])  # type: ignore[misc]
            return
        for name, value in zip(Block.__slots__, state, strict=True):
            setattr(self, name, value)


@dataclass(slots=True, frozen=True)
class Iteration:
    """A further model call the server made inside one request (``usage.iterations[]`` after
    the first): the request's own continuation after a server-side tool (``message``), or
    another model's call, such as an advisor's (``advisor_message``), billed at its model."""

    kind: str
    model: str | None
    input: int = 0
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    output: int = 0

    @property
    def prompt_total(self) -> int:
        return self.input + self.cache_read + self.cache_write_5m + self.cache_write_1h

    @property
    def continues_request(self) -> bool:
        """The request's own model went on (its output is part of the response's content)."""
        return self.kind == "message"


@dataclass(slots=True)
class Usage(PickledByFields):
    """Recorded API usage of one response (counted once per ``message.id``).

    With several server-side iterations the fields are the first model call's (the prompt as
    the request sent it) and ``iterations`` holds the later ones; the record's top-level
    fields, which add up the request model's calls, are what ``total`` gives back.
    """

    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0
    cache_write_5m: int | None = None
    cache_write_1h: int | None = None
    iterations: tuple[Iteration, ...] = ()

    @property
    def prompt_total(self) -> int:
        """input + cache write + cache read: the size of the prompt the server saw."""
        return self.input + self.cache_write + self.cache_read

    @property
    def counted_prompt(self) -> int:
        """The prompt as the top-level fields report it, which add up every call of the
        request's own model: what Claude Code counted, and so what its thresholds saw."""
        if not self.iterations:  # most usages: no generator to make for an empty sum
            return self.input + self.cache_write + self.cache_read
        return self.prompt_total + sum(
            i.prompt_total for i in self.iterations if i.continues_request
        )

    @property
    def response_output(self) -> int:
        """Output of the request's own model over all its calls: the response's content."""
        if not self.iterations:
            return self.output
        return self.output + sum(i.output for i in self.iterations if i.continues_request)

    @property
    def total(self) -> int:
        """Claude Code's usage total (the top-level fields: every call of the request's own
        model, with output), the base of ``tokenCountWithEstimation``."""
        return self.counted_prompt + self.response_output

    def to_json(self) -> dict[str, int | None]:
        return {
            "input": self.input,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "cache_write_5m": self.cache_write_5m,
            "cache_write_1h": self.cache_write_1h,
            "output": self.output,
        }


#: metadata a replay derives from a response's recorded output (``measures.tokens.size_thinking``),
#: not read from the file: recomputed by each replay, so neither a forecast's copy, nor the stored
#: messages, nor a live version's copy of a response that records were merged into keep it
DERIVED_METADATA = ("thinking_sized", "thinking_unsized", "thinking_scaled_by")


@dataclass(slots=True)
class Message(PickledByFields):
    """One conversation message in chain order (assistant split records merged by id)."""

    uuid: str
    role: Literal["user", "assistant", "system"]
    kind: MessageKind
    blocks: list[Block]
    timestamp: str = ""
    line: int = 0
    file: str = ""
    message_id: str | None = None
    request_id: str | None = None
    model: str | None = None
    usage: Usage | None = None
    version: str | None = None
    #: working directory the record was written in (a change mid-thread is a restart)
    cwd: str | None = None
    is_meta: bool = False
    is_sidechain: bool = False
    agent_id: str | None = None
    #: uuids of every record merged into this message, in file order
    uuids: list[str] = field(default_factory=list)
    #: subtype metadata (compactMetadata / microcompactMetadata / snipMetadata)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: ``original_output`` as ``compact_text`` holds it
    compact_original_output: str | bytes | Deflated | None = None
    #: index in its thread's message list (set when the thread is built)
    index: int = -1
    #: string content (not a block list): matters for the padded estimator
    string_content: bool = False

    @property
    def original_output(self) -> str | None:
        """Raw tool output (toolUseResult) kept only where the model saw a persisted preview."""
        stored = self.compact_original_output
        return None if stored is None else expand_text(stored)

    @original_output.setter
    def original_output(self, text: str | None) -> None:
        self.compact_original_output = None if text is None else compact_text(text)


# the fields of ``Usage`` and ``Message``, in the order they are pickled (``PickledByFields``)
Usage._FIELDS = tuple(f.name for f in fields(Usage))
Message._FIELDS = tuple(f.name for f in fields(Message))


@dataclass(slots=True, frozen=True)
class Problem:
    """Something in the input that could not be used as-is."""

    line: int
    code: str
    message: str
    file: str = ""
    severity: Literal["error", "warning", "info"] = "warning"

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "code": self.code,
            "message": self.message,
            "severity": self.severity,
        }

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.file else f"line {self.line}"
        return f"{where}: {self.message}"


class TranscriptError(Exception):
    """The input has nothing usable; ``problems`` says why, line by line."""

    def __init__(self, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


#: Problems kept per upload; past this they are only counted (a broken file has one per line).
MAX_PROBLEMS = 1000


class ProblemList(list[Problem]):
    """A list of problems that keeps the first ``limit`` and counts the ones it drops, so a
    file with a problem on each of its million lines costs a thousand problems of memory."""

    def __init__(self, items: Iterable[Problem] = (), limit: int = MAX_PROBLEMS) -> None:
        super().__init__()
        self.limit = limit
        #: problems dropped past the limit
        self.dropped = 0
        self.extend(items)

    def append(self, problem: Problem) -> None:
        if len(self) < self.limit:
            super().append(problem)
        else:
            self.dropped += 1

    def extend(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            self.append(problem)
        self.dropped += getattr(problems, "dropped", 0)

    def append_final(self, problem: Problem) -> None:
        """Keep ``problem`` even past the limit: the last word on why reading stopped."""
        super().append(problem)

    def insert(self, index: SupportsIndex, problem: Problem) -> None:
        if len(self) < self.limit:
            super().insert(index, problem)
        else:
            self.dropped += 1

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled in the session cache: keep the limit and the count
        return (_rebuild_problems, (list(self), self.limit, self.dropped))


def _rebuild_problems(items: list[Problem], limit: int, dropped: int) -> ProblemList:
    problems = ProblemList(items, limit)
    problems.dropped = dropped
    return problems


def dropped_problems(problems: list[Problem]) -> int:
    """How many problems a ``ProblemList`` left out (0 for a plain list)."""
    return int(getattr(problems, "dropped", 0))
