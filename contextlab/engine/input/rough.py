"""Claude Code's rough token estimate (``roughTokenCountEstimation``): a text's UTF-16 length / 4,
JS rounding; an image or document 2,000. What its thresholds compare beyond the last recorded
usage, and what an agent's adapter adds to a recorded count to put it on the same footing."""

from __future__ import annotations

import math

from .jsutil import js_len
from .model import Block

#: Claude Code's flat estimate for an image or document block (IMAGE_MAX_TOKEN_SIZE).
IMAGE_ROUGH_TOKENS = 2000


def rough_text(text: str) -> int:
    """``roughTokenCountEstimation``: round(length / 4), JS rounding, UTF-16 length."""
    # ``js_round(js_len(text) / 4)`` with an ASCII text's length and the rounding inline: asked
    # once for every block of a session
    return math.floor((len(text) if text.isascii() else js_len(text)) / 4 + 0.5)


def block_rough(block: Block, text: str | None = None) -> int:
    """``roughTokenCountEstimationForBlock`` (cached on the block); ``text``: the block's text
    where the caller has already read it back (``Block.text`` expands it on every access)."""
    if block.rough < 0:
        if block.type in ("image", "document"):
            block.rough = IMAGE_ROUGH_TOKENS
        else:
            text = block.text if text is None else text
            block.rough = rough_text(text) + block.media * IMAGE_ROUGH_TOKENS
    return block.rough
