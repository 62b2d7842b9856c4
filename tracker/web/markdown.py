"""Advisory `details` Markdown → HTML, safely: raw HTML in the source is escaped, not passed through.

markdown-it-py with the CommonMark preset, `html` off (a `<script>` in the text is shown as text),
tables and strikethrough on; its link validator drops `javascript:`, `vbscript:`, `file:` and
`data:` URLs (the text stays, the link does not). ```diff fences get one span per line with the
line's kind, so removed and added lines read as such without JavaScript; a table comes in a
`.scroll` box (scrolled sideways on a phone, never squeezed).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup, escape

_DIFF_KINDS = (("+++", "file"), ("---", "file"), ("@@", "hunk"), ("+", "add"), ("-", "del"))


def _line_kind(line: str) -> str:
    return next((kind for prefix, kind in _DIFF_KINDS if line.startswith(prefix)), "ctx")


def _fence(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    lang = token.info.strip().split(maxsplit=1)[0] if token.info.strip() else ""
    if lang != "diff":
        body = escape(token.content)
        cls = f' class="language-{escape(lang)}"' if lang else ""
        return f'<pre tabindex="0"><code{cls}>{body}</code></pre>\n'
    spans = "".join(
        f'<span class="dl {_line_kind(line)}">{escape(line)}</span>\n'
        for line in token.content.splitlines()
    )
    return f'<pre tabindex="0" class="diff">{spans}</pre>\n'


def _table_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return '<div class="scroll" tabindex="0">' + str(self.renderToken(tokens, idx, options, env))


def _table_close(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return str(self.renderToken(tokens, idx, options, env)) + "</div>\n"


@cache
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.add_render_rule("fence", _fence)
    md.add_render_rule("table_open", _table_open)  # a table scrolls in its box on a phone
    md.add_render_rule("table_close", _table_close)
    return md


def render_markdown(text: str) -> Markup:
    """`text` (Markdown from an advisory) as safe HTML."""
    return Markup(_parser().render(text))  # html disabled: every text run is escaped
