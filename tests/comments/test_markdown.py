"""Comment Markdown: formatting survives, every XSS payload comes out inert."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from contextlab.comments import markdown

PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg/onload=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](java%0ascript:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '[x]("onmouseover="alert(1))',
    '[x](http://a.b/"onmouseover="alert(1))',
    '[x](https://ok.example/ "title\\" onmouseover=\\"alert(1)")',
    "<javascript:alert(1)>",
    "![x](https://tracker.example/pixel.png)",
    "![x](javascript:alert(1))",
    "[ref]\n\n[ref]: javascript:alert(1)",
    "<iframe src=//evil.example></iframe>",
    "<style>body{display:none}</style>",
    "```html\n<script>alert(1)</script>\n```",
    "`<b onclick=alert(1)>`",
    "<<script>script>alert(1)<</script>/script>",
    "<div\nonclick=alert(1)>x</div>",
]

#: the only tags the renderer may produce
ALLOWED_TAGS = {
    "p", "a", "strong", "em", "code", "pre", "ul", "ol", "li", "blockquote", "h1", "h2", "h3",
    "h4", "h5", "h6", "hr", "br", "table", "thead", "tbody", "tr", "th", "td", "s",
}  # fmt: skip


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: set[str] = set()
        self.hrefs: list[str] = []
        self.classes: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for name, value in attrs:
            self.attrs.add(name)
            if name == "class":
                self.classes.append(value or "")
            if name in ("href", "src"):
                self.hrefs.append(value or "")


def parsed(html: str) -> _Collect:
    """What a browser's parser would build: every element and attribute, as parsed."""
    collect = _Collect()
    collect.feed(html)
    collect.close()
    return collect


@pytest.mark.parametrize("payload", PAYLOADS)
def test_xss_payloads_are_inert(payload):
    html = str(markdown.render(payload))
    found = parsed(html)
    assert found.tags <= ALLOWED_TAGS, (payload, html)
    assert found.attrs <= {"href", "rel", "title", "style", "class"}, (payload, html)
    # a fenced block's language is the only class an author sets, always prefixed
    assert all(c.startswith("language-") for c in found.classes), (payload, html)
    for href in found.hrefs:
        assert re.match(r"^(https?:|mailto:|/|#|[^:]*$)", href, re.IGNORECASE), (payload, href)


def test_style_attributes_only_on_table_alignment():
    html = str(markdown.render("| a | b |\n|:-|-:|\n| 1 | 2 |"))
    assert "<table>" in html
    assert set(re.findall(r'style="([^"]*)"', html)) <= {"text-align:left", "text-align:right"}


def test_formatting_and_safe_links_render():
    html = str(
        markdown.render(
            "**bold** _it_ `code` ~~gone~~\n\n- one\n- two\n\n"
            "[docs](https://example.com/a?b=1) [here](/sessions/1/requests/2/#b-3-0) "
            "[mail](mailto:team@example.com)"
        )
    )
    assert "<strong>bold</strong>" in html
    assert "<em>it</em>" in html
    assert "<code>code</code>" in html
    assert "<s>gone</s>" in html
    assert "<li>one</li>" in html
    assert 'href="https://example.com/a?b=1"' in html
    assert 'href="/sessions/1/requests/2/#b-3-0"' in html
    assert 'href="mailto:team@example.com"' in html
    assert html.count('rel="nofollow noopener noreferrer"') == 3


def test_text_is_escaped_not_dropped():
    html = str(markdown.render('a < b && c > d "q" <b>x</b>'))
    assert "a &lt; b &amp;&amp; c &gt; d &quot;q&quot; &lt;b&gt;x&lt;/b&gt;" in html


@pytest.mark.parametrize(
    "url",
    ["javascript:x", " JAVASCRIPT:x", "data:text/html,x", "file:///etc/passwd", "vbscript:x"],
)
def test_unsafe_schemes_are_refused(url):
    assert not markdown.safe_link(url)


@pytest.mark.parametrize(
    "url", ["https://a.b", "http://a.b/c:d", "mailto:a@b.c", "/x:y", "#b-1-0", "a/b"]
)
def test_safe_links_are_kept(url):
    assert markdown.safe_link(url)


def test_redacted_rendering_redacts_a_secret_markdown_escapes_would_join():
    core = "Q9" * 12 + "abcdefXYZ123" * 3
    escaped = "key sk\\-ant\\-api03\\-" + core  # renders as sk-ant-api03-<core>
    plain = str(markdown.render(escaped))
    assert core in plain  # the plain renderer shows what the author wrote
    shared = str(markdown.render_redacted(escaped))
    assert core not in shared
    assert "[REDACTED:" in shared


def test_redacted_rendering_keeps_kept_categories_and_formatting():
    html = str(markdown.render_redacted("**mail** carol@corp-mail.io", keep={"email"}))
    assert "<strong>mail</strong>" in html
    assert "carol@corp-mail.io" in html
    html = str(markdown.render_redacted("**mail** carol@corp-mail.io"))
    assert "carol@corp-mail.io" not in html
    assert "[REDACTED:email]" in html
