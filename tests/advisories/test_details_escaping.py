"""Issue 26, item 5: upstream text (a commit's title, message and authors, a changed key's name) is
literal text in an advisory's `details` Markdown: a title with image, link and HTML syntax is
stored escaped in the OSV record and shown as those characters on the advisory page (over HTTP,
through `render_markdown`) and by a CommonMark renderer with raw HTML on (another consumer of
the record); before, it rendered as an image, a link and an <img> element."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from advkit import HUB, MIXTRAL, MIXTRAL_SHAS, NOW, ch, commit, publish
from fastapi.testclient import TestClient
from markdown_it import MarkdownIt

from tracker.advisories.values import inline
from tracker.api import create_app
from tracker.app import build
from tracker.settings import load_settings
from tracker.shared.domain import Artifact, ChangeKind
from tracker.store.advisories import AdvisoryStore
from tracker.web.markdown import render_markdown

TITLE = "Fix ![i](http://evil.example/i.png) see [docs](http://evil.example/) <img src=x onerror=alert(1)> *now* &copy; | x |"
BODY = "# Heading\n\n- item <script>alert(1)</script>\n1. [a](http://evil.example/a)"
AUTHOR = "**mallory**"
KEY = "a](http://evil.example/k) ![k"


def test_a_commit_title_with_markdown_is_literal_text(tmp_path: Path) -> None:
    settings = load_settings(state_dir=tmp_path / "state")
    app = build(settings)
    try:
        store = AdvisoryStore(app.store.engine)
        first = commit(MIXTRAL_SHAS[0])
        publish(
            store, repo_id=MIXTRAL, commit=first, previous=None, changes=[],
            estimate_before=None, estimate_after=None, repo_url=f"{HUB}/{MIXTRAL}",
            overrides=None, prefix="TRACKER", now=NOW,
        )  # fmt: skip
        hostile = replace(
            commit(MIXTRAL_SHAS[1], MIXTRAL_SHAS[0], TITLE),
            message=f"{TITLE}\n\n{BODY}",
            authors=(AUTHOR,),
        )
        eos = ch(Artifact.CONFIG, ChangeKind.CHANGED, "eos_token_id", 2, 32000)
        weird = ch(Artifact.CONFIG, ChangeKind.CHANGED, KEY, "a" * 80, "b" * 80)
        [adv] = publish(
            store, repo_id=MIXTRAL, commit=hostile, previous=MIXTRAL_SHAS[0],
            changes=[eos, weird], estimate_before=None, estimate_after=None,
            repo_url=f"{HUB}/{MIXTRAL}", overrides=None, prefix="TRACKER", now=NOW,
        )  # fmt: skip
        stored = store.get(adv.id)
        assert stored is not None
        details = stored.record["details"]
        assert isinstance(details, str)
        # the stored OSV details carry the title escaped: every special character backslashed
        assert f"“{inline(TITLE)}” by \\*\\*mallory\\*\\*" in details
        assert (
            "“Fix !\\[i\\](http://evil.example/i.png) see \\[docs\\](http://evil.example/) "
            in details
        )
        assert "> \\# Heading" in details and "> 1\\. \\[a\\](http://evil.example/a)" in details
        assert f"**{inline(KEY)}** (changed):" in details
        with TestClient(create_app(app), follow_redirects=False) as client:
            page = client.get(f"/advisories/{adv.id}")
        assert page.status_code == 200
        html_with_raw = MarkdownIt("commonmark", {"html": True}).render(details)
        for html in (page.text, str(render_markdown(details)), html_with_raw):
            assert "<img" not in html and "<script" not in html
            assert 'href="http://evil.example' not in html
            assert "<em>now</em>" not in html and "<strong>mallory</strong>" not in html
            assert "<h1>Heading</h1>" not in html and "<ol>" not in html
        shown = str(render_markdown(details))
        assert (
            "Fix ![i](http://evil.example/i.png) see [docs](http://evil.example/) "
            "&lt;img src=x onerror=alert(1)&gt; *now* &amp;copy; | x |"
        ) in shown
        assert shown.count("Fix ![i](http://evil.example/i.png)") == 2  # the commit, the "fix" kind
        assert "Fix ![i](http://evil.example/i.png)" in page.text
        assert "# Heading" in shown and "&lt;script&gt;alert(1)&lt;/script&gt;" in shown
    finally:
        app.close()


VALUE = "![v](http://evil.example/v.png) <img src=v> **bold** [l](http://evil.example/l)"


def test_values_in_change_summaries_and_rationales_are_literal_text(tmp_path: Path) -> None:
    """The bullets under "What changed" and the severity line quote upstream values (a config
    value, a special token such as `<unk>`) in tracker's own prose: before, a value rendered as
    an image, a link and an <img> element there, and `<unk>` vanished as an unknown HTML tag."""
    settings = load_settings(state_dir=tmp_path / "state")
    app = build(settings)
    try:
        store = AdvisoryStore(app.store.engine)
        publish(
            store, repo_id=MIXTRAL, commit=commit(MIXTRAL_SHAS[0]), previous=None, changes=[],
            estimate_before=None, estimate_after=None, repo_url=f"{HUB}/{MIXTRAL}",
            overrides=None, prefix="TRACKER", now=NOW,
        )  # fmt: skip
        note = ch(Artifact.CONFIG, ChangeKind.ADDED, "note", None, VALUE,
                  summary=f'note added: "{VALUE}"')  # fmt: skip
        pad = ch(Artifact.SPECIAL_TOKENS, ChangeKind.CHANGED, "pad_token", "<unk>", "</s>",
                 file="special_tokens_map.json",
                 summary='pad_token changed: "<unk>" → "</s>"')  # fmt: skip
        advs = publish(
            store, repo_id=MIXTRAL, commit=commit(MIXTRAL_SHAS[1], MIXTRAL_SHAS[0]),
            previous=MIXTRAL_SHAS[0], changes=[note, pad], estimate_before=None,
            estimate_after=None, repo_url=f"{HUB}/{MIXTRAL}", overrides=None, prefix="TRACKER",
            now=NOW,
        )  # fmt: skip
        details = [str(a.record["details"]) for a in advs]
        text = "\n".join(details)
        assert f'note added: "{inline(VALUE)}"' in text
        assert 'pad_token changed: "\\<unk\\>" → "\\</s\\>"' in text
        for d in details:
            html = MarkdownIt("commonmark", {"html": True}).render(d)
            shown = str(render_markdown(d))
            for out in (html, shown):
                assert "<img" not in out and 'href="http://evil.example' not in out
                assert "<strong>bold</strong>" not in out
        shown = "\n".join(str(render_markdown(d)) for d in details)
        assert "![v](http://evil.example/v.png) &lt;img src=v&gt; **bold**" in shown.replace(
            "&quot;", '"'
        )
        assert "pad_token changed: &quot;&lt;unk&gt;&quot; → &quot;&lt;/s&gt;&quot;" in shown
    finally:
        app.close()
