"""Comment bodies: Markdown rendered safely.

markdown-it-py (CommonMark, plus tables and strikethrough) with raw HTML off, so every ``<`` a
member types is escaped text; images off (a comment must not make a reader's browser fetch a
URL); links only to http(s), mailto and same-site addresses, marked ``nofollow noopener
noreferrer``. What comes out holds no tag or attribute an author chose beyond these, so it needs
no sanitiser after it; the tests feed it the usual XSS payloads.

Shared pages and exports render a body that redaction already went over, and check the HTML
again: a secret split by Markdown escapes (``sk\\-ant-…``) only joins up once rendered. When
that happens the body is shown as plain, escaped, redacted text instead.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from functools import lru_cache
from html import unescape

from django.utils.html import escape, strip_tags
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from contextlab import redaction

#: URL schemes a comment's link may use; anything else with a scheme is dropped
ALLOWED_SCHEMES = frozenset({"http", "https", "mailto"})
_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):", re.IGNORECASE)
#: the part of a URL before its path, query or fragment (where a scheme's colon would be)
_BEFORE_PATH = re.compile(r"^[^/?#]*")


def safe_link(url: str) -> bool:
    """True for links a comment may carry: http(s), mailto, or relative (no scheme at all).
    A colon before the first ``/``, ``?`` or ``#`` that is not an allowed scheme's (``javascript:``,
    ``data:``, ``vbscript:``, ``java%09script:``) refuses the link."""
    url = url.strip()
    head = _BEFORE_PATH.match(url)
    if head is None or ":" not in head.group(0):
        return True
    scheme = _SCHEME.match(url)
    return scheme is not None and scheme.group(1).lower() in ALLOWED_SCHEMES


def _link_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
    return self.renderToken(tokens, idx, options, env)


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.disable(["image", "html_inline", "html_block"])
    md.validateLink = safe_link  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    return md


_MD = _parser()


@lru_cache(maxsize=4096)
def _html(body: str) -> str:
    # a pure function of the body: pages showing the same comments render each once
    return str(_MD.render(body))


def render(body: str) -> SafeString:
    """A comment's Markdown as HTML that is safe to put in a page."""
    # safe by construction: raw HTML is off, every text is escaped, links are allow-listed
    return mark_safe(_html(body))


_HREF = re.compile(r'href="([^"]*)"')


def revealed(body: str) -> str:
    """What a reader of the rendered body gets to see: its text, and its links' addresses."""
    html = _html(body)
    hrefs = (unescape(href) for href in _HREF.findall(html))
    return "\n".join([unescape(strip_tags(html)), *hrefs])


def shareable(body: str) -> str:
    """The source a share or an export carries, for the redaction pass to read: the body as
    written, unless Markdown hides from the detectors something its rendering shows (escapes
    such as ``\\-\\-\\-\\-\\-BEGIN``, entities, emphasis inside a token); then what the
    rendering shows, as plain text, so that redaction sees, and replaces, what readers would."""
    shown = revealed(body)
    if any(shown[s.start : s.end] not in body for s in redaction.find(shown)):
        return shown
    return body


def render_redacted(body: str, keep: Collection[str] = ()) -> SafeString:
    """A body for a share or an export: redacted, rendered, and checked again, in the HTML and
    in the text a reader sees (Markdown escapes and emphasis can join or split a secret only
    once rendered); when the check finds something, the visible text, redacted and escaped,
    stands in for the rendering."""
    redacted, _ = redaction.redact(body, keep)
    html = _html(redacted)
    visible = unescape(strip_tags(html))
    if not any(
        span.category not in keep for text in (html, visible) for span in redaction.find(text)
    ):
        return mark_safe(str(html))  # as render()
    plain, _ = redaction.redact(visible, keep)
    return mark_safe('<p class="plain">' + escape(plain.strip()).replace("\n", "<br>") + "</p>")
