"""`context export --format html|markdown`: one self-contained page, checked in a real headless
browser (Debian's chromium, which scripts/test.sh installs): it renders, tool calls and results
are collapsed until opened, the summary and the cut are marked, and nothing is fetched."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from .builders import add_session, coding_session
from .test_inspect_cli import WINDOW, add_messages, compacted_twice, run

PROBE = """<script>
const d = [...document.querySelectorAll('section:not(.summary) details')];
const r = {details: d.length, closed: d.every(x => !x.open)};
const pre = d[0].querySelector('pre');
const closedHeight = d[0].getBoundingClientRect().height;
r.hiddenBefore = !pre.checkVisibility();
d[0].open = true;
r.shownAfter = pre.checkVisibility() && d[0].getBoundingClientRect().height > closedHeight + 10;
r.resources = performance.getEntriesByType('resource').length;
r.summary = document.querySelectorAll('section.summary').length;
r.cut = document.querySelectorAll('#cut').length;
r.synthetic = document.querySelectorAll('section.synthetic').length;
r.height = document.body.scrollHeight;
r.title = document.title;
document.body.setAttribute('data-probe', JSON.stringify(r));
</script>"""


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("chromium is not installed (scripts/test.sh installs Debian's chromium)")
    return path


def browse(tmp_path: Path, page: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless chromium with every network route closed: a proxy on a closed port and no
    name resolution, so a page that fetched anything would show it in its resource entries.

    Chromium's headless start now and then hangs for good in a loaded container (seen once
    in CI: a screenshot still not taken after 120 s). Such a start is killed and the page
    opened once more in a fresh profile; a page that hangs twice fails the test."""
    for attempt in (1, 2):
        command = [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",  # a container's small /dev/shm stalls it
            "--no-first-run",
            f"--user-data-dir={tmp_path / f'profile-{attempt}'}",
            "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--window-size=1000,1400",
            *args,
            page.as_uri(),
        ]
        # A session of its own, so a hung start is killed with every process it made.
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            if attempt == 2:
                raise
            continue
        return subprocess.CompletedProcess(command, proc.returncode, out, err)
    raise AssertionError("unreachable")


def probe_page(tmp_path: Path, text: str, script: str) -> dict:
    """What ``script`` (put before ``</body>``) found in the page, read from the rendered DOM."""
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", script + "</body>"))
    shown = browse(tmp_path, probe, "--dump-dom")
    assert shown.returncode == 0, shown.stderr[-2000:]
    found = re.search(r'data-probe="([^"]*)"', shown.stdout)
    assert found, shown.stdout[:2000]
    return json.loads(html.unescape(found.group(1)))


def screenshot(tmp_path: Path, page: Path, keep_as: str) -> None:
    """A screenshot of the page, kept at ``keep_as`` for a person to look at."""
    shot = tmp_path / "shot.png"
    taken = browse(tmp_path, page, f"--screenshot={shot}")
    assert taken.returncode == 0 and shot.stat().st_size > 20_000
    Path(keep_as).write_bytes(shot.read_bytes())


@pytest.fixture
def compacted(db, cli):
    add_session(db, 1, coding_session(8), model="gpt-4o", system_prompt="You are a coder.")
    run(cli, db, "compact", "1", "--force", *WINDOW, "--keep-recent-tokens", "1200")
    add_messages(
        db,
        1,
        [
            {"role": "user", "content": "Run <b>the</b> tests & report \x1b[2J"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_t",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": "pytest -q"})},
                    }
                ],
            },
        ],
    )
    return db


def test_html_export_renders_collapses_and_fetches_nothing(compacted, cli, tmp_path):
    db = compacted
    page = tmp_path / "session.html"
    run(cli, db, "context", "export", "1", "--format", "html", "-o", page)
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<style>" in text
    assert not re.search(
        r"""src\s*=|href\s*=(?!"#)|url\(|@import|<script|<link|<img|<iframe""", text, re.I
    )
    assert "\x1b" not in text and "&lt;b&gt;the&lt;/b&gt; tests &amp; report" in text
    assert 'href="#cut"' in text  # links within the page only
    details = re.findall(r"<details[^>]*>", text)
    assert details.count("<details open>") == 1  # the summary's: open, and it folds
    details.remove("<details open>")
    calls = db.scalar(
        "SELECT COUNT(*) FROM agent_message WHERE tool_calls IS NOT NULL AND id >= "
        "(SELECT first_kept_message_id FROM agent_compaction)"
    )
    assert len(details) >= 2 * calls and not any("open" in d for d in details)
    assert "tokens</span>" in text and "no result was recorded for bash (call_t)" in text

    r = probe_page(tmp_path, text, PROBE)
    assert r["details"] == len(details) and r["closed"]
    assert r["hiddenBefore"] and r["shownAfter"]  # collapsed until opened
    assert r["resources"] == 0  # nothing fetched
    assert r["summary"] == 1 and r["cut"] == 1 and r["synthetic"] == 1
    assert r["height"] > 1000 and r["title"].startswith("Session 1")

    screenshot(tmp_path, page, "/tmp/ctxtool-export-screenshot.png")


def test_markdown_export_marks_summary_cut_and_tools(compacted, cli, tmp_path):
    db = compacted
    cp = db.rows("SELECT id, first_kept_message_id FROM agent_compaction")[0]
    out = run(cli, db, "context", "export", "1").output  # markdown to stdout (no pager: piped)
    assert out.startswith("# Session 1")
    assert "## summary (sent as a user message)" in out
    assert f"✂ **cut: messages from #{cp['first_kept_message_id']} on are kept verbatim" in out
    assert "**→ call `bash`** `call_t`" in out and '"cmd": "pytest -q"' in out
    assert "result of read (call7)" in out and "\x1b" not in out
    at = run(cli, db, "context", "export", "1", "--at", cp["id"], "--format", "markdown").output
    assert at == out  # one checkpoint: --at it is the latest
    result = run(
        cli, db, "context", "export", "1", "-o", tmp_path / "no" / "such" / "dir.md", code=1
    )
    assert result.output.startswith("Error: cannot write")


LONG_PROBE = """<script>
const r = {};
r.height = document.body.scrollHeight;
r.tocCut = document.querySelectorAll('nav.toc a[href="#cut"]').length;
r.tocSummary = document.querySelectorAll('nav.toc a[href="#summary"]').length;
r.tocCheckpoints = document.querySelectorAll('nav.toc li').length;
r.summaryFold = document.querySelectorAll('#summary details[open] .md').length;
r.summaryLists = document.querySelectorAll('#summary .md li').length;
r.summaryBold = document.querySelectorAll('#summary .md b').length;
r.summaryScripts = document.querySelectorAll('script').length;
const long = document.querySelector('section.user:not(.summary) details');
r.longClosed = long !== null && !long.open;
document.body.setAttribute('data-probe', JSON.stringify(r));
</script>"""


def test_long_messages_fold_and_the_page_has_contents(compacted, cli, tmp_path):
    """A 991-line message of any role folds (it made a page 12,000 px tall); the contents link
    the summary, the cut and list the checkpoints; the summary is Markdown, escaped, foldable."""
    db = compacted
    summary = (
        "## Goal\n- Fix **every** failing test <script>alert(1)</script>\n- keep `src/a.py`\n"
        "\n1. first\n2. second"
    )
    with db.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE agent_compaction SET summary = '{summary}'")
    add_messages(db, 1, [{"role": "user", "content": "\n".join(f"line {i}" for i in range(991))}])
    page = tmp_path / "long.html"
    result = run(cli, db, "context", "export", "1", "-o", page)  # the extension picks html
    assert "(html," in result.output
    text = page.read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    r = probe_page(tmp_path, text, LONG_PROBE)
    assert r["longClosed"] and r["height"] < 6000, r
    assert r["tocCut"] == 1 and r["tocSummary"] >= 1 and r["tocCheckpoints"] >= 4, r
    assert r["summaryFold"] == 1 and r["summaryLists"] == 4 and r["summaryBold"] == 1, r
    assert r["summaryScripts"] == 1  # the probe's own: the summary's was escaped
    screenshot(tmp_path, page, "/tmp/ctxtool-export-long-screenshot.png")


SUMMARY_PROBE = """<script>
const md = document.querySelector('#summary .md');
const r = {};
r.olItems = [...md.querySelectorAll('ol')].map(o => o.querySelectorAll(':scope > li').length);
r.nested = md.querySelectorAll('li > ul > li').length;
r.boldCode = md.querySelectorAll('b > code').length;
r.code = md.querySelectorAll('code').length;
r.asterisks = md.textContent.includes('**');
r.scripts = document.querySelectorAll('script').length;
document.body.setAttribute('data-probe', JSON.stringify(r));
</script>"""


def test_a_runtimes_summary_renders_as_markdown_in_a_browser(db, cli, tmp_path):
    """Claude Code's compaction summary of a real session: its numbered lists, items apart by
    blank lines, are one list each (numbered 1 to 7, not all 1); the bullets under an item are
    its sub-list; ``**`path`**`` is bold code, no asterisk left; and a <script> in the summary
    stays text."""
    from .conftest import TRANSCRIPTS

    run(cli, db, "import", TRANSCRIPTS / "claude-code/a5c478e1-0d31-46d4-9fd6-3b6b203b3752.jsonl")
    summary = db.scalar("SELECT summary FROM agent_compaction")
    assert "\n\n2. The plan" in summary and "\n   - `upload_session.py`" in summary
    with db.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE agent_compaction SET summary = :s"),
            {"s": summary + "\n\n<script>document.title = 'x'</script>"},
        )
    page = tmp_path / "claude.html"
    run(cli, db, "context", "export", "1", "-o", page)
    r = probe_page(tmp_path, page.read_text(), SUMMARY_PROBE)
    # Analysis 1-7, then the summary's own sections, each a list of its items.
    assert r["olItems"][0] == 7 and max(r["olItems"]) >= 7, r
    assert r["nested"] >= 30, r  # 10 files explored, 10 phases, ...
    assert r["boldCode"] >= summary.count("**`") == 14 and not r["asterisks"], r
    assert r["code"] > 50 and r["scripts"] == 1, r  # the probe's own script alone


def test_the_output_extension_picks_the_format(compacted, cli, tmp_path):
    db = compacted
    for name, start in (
        ("a.md", "# Session 1"),
        ("a.jsonl", '{"role": "system"'),
        ("a.htm", "<!DOCTYPE"),
    ):
        run(cli, db, "context", "export", "1", "-o", tmp_path / name)
        assert (tmp_path / name).read_text().startswith(start), name
    md = run(cli, db, "context", "export", "1", "--format", "md").output
    assert md.startswith("# Session 1")
    forced = tmp_path / "b.html"
    run(cli, db, "context", "export", "1", "--format", "markdown", "-o", forced)
    assert forced.read_text().startswith("# Session 1")  # --format wins over the extension


CHART_PROBE = """<script>
const svg = document.querySelector('figure.chart svg');
const box = e => e.getBoundingClientRect();
const r = {svgWidth: box(svg).width, svgHeight: box(svg).height};
r.marks = [...svg.querySelectorAll('a.checkpoint')].map(a => ({
  id: +a.dataset.checkpoint, before: +a.dataset.before, after: +a.dataset.after,
  href: a.getAttribute('href'), target: document.querySelector(a.getAttribute('href')) !== null,
  height: box(a).height, title: a.querySelector('title').textContent}));
const line = cls => { const l = svg.querySelector('line.' + cls);
  return l === null ? null : {width: box(l).width, y: +l.getAttribute('y1')}; };
r.threshold = line('threshold');
r.window = line('window');
r.series = box(svg.querySelector('polyline.series')).width;
r.shown = [...svg.querySelectorAll('rect.shown')].map(x => x.textContent);
r.above = box(svg).bottom <= box(document.querySelector('section')).top;
r.resources = performance.getEntriesByType('resource').length;
r.scripts = document.querySelectorAll('script').length;
document.body.setAttribute('data-probe', JSON.stringify(r));
</script>"""
CHART_WINDOW = ["--context-window", "6000", "--reserve-tokens", "1000"]


def chart_of(tmp_path: Path, text: str) -> dict:
    """What the browser drew of the page's chart: its marks, lines and the span shown."""
    r = probe_page(tmp_path, text, CHART_PROBE)
    assert r["resources"] == 0 and r["scripts"] == 1, r  # nothing fetched, the probe's script
    assert r["svgWidth"] > 800 and r["svgHeight"] > 200 and r["series"] > 0.8 * r["svgWidth"]
    assert r["above"], "the chart stands above the messages"
    assert all(m["target"] and m["height"] > 5 for m in r["marks"]), r["marks"]
    return r


def test_the_chart_of_a_runtimes_checkpoints_in_a_browser(db, cli, tmp_path):
    """A real pi transcript with three checkpoints of its own: a mark for each (before ->
    after, the figures the runtime recorded in its title), linked to its entry in the page,
    and the threshold line; --at marks the span it shows."""
    from .conftest import TRANSCRIPTS

    run(cli, db, "import", TRANSCRIPTS / "pi/openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc.jsonl")
    run(cli, db, "tokens", "count", "--all")
    cps = db.rows("SELECT id, tokens_before FROM agent_compaction ORDER BY id")
    assert len(cps) == 3
    page = tmp_path / "pi.html"
    run(cli, db, "context", "export", "1", "-o", page)
    r = chart_of(tmp_path, page.read_text())
    assert [m["id"] for m in r["marks"]] == [c["id"] for c in cps]
    assert [m["href"] for m in r["marks"]] == [
        f"#checkpoint-{cps[0]['id']}",
        f"#checkpoint-{cps[1]['id']}",
        "#summary",  # the latest, shown: its summary
    ]
    for mark, cp in zip(r["marks"], cps):
        assert mark["before"] > mark["after"] > 0
        assert f"recorded {cp['tokens_before']:,} → ?" in mark["title"]
    # deepseek-chat: the default 128k window, the threshold 16,384 below it.
    assert r["threshold"]["width"] > 0.8 * r["svgWidth"] and r["window"] is not None
    assert r["threshold"]["y"] > r["window"]["y"]
    assert r["shown"] == ["shown: the latest"]
    screenshot(tmp_path, page, "/tmp/ctxtool-export-chart-screenshot.png")

    at = tmp_path / "at.html"
    run(cli, db, "context", "export", "1", "--at", cps[0]["id"], "-o", at)
    r = chart_of(tmp_path, at.read_text())
    assert r["shown"] == [f"shown: --at {cps[0]['id']}"] and len(r["marks"]) == 3


def test_the_chart_of_a_session_ctxtool_compacted_twice_in_a_browser(db, cli, tmp_path):
    """Two checkpoints of ctxtool's: each mark's before is the size ctxtool recorded when it
    compacted (the same measure), the threshold line sits at 5000 of a 6000-token window."""
    cps, _ = compacted_twice(db, cli)
    run(cli, db, "tokens", "count", "1")
    recorded = db.rows("SELECT id, tokens_before FROM agent_compaction ORDER BY id")
    page = tmp_path / "twice.html"
    run(cli, db, "context", "export", "1", "-o", page, *CHART_WINDOW)
    r = chart_of(tmp_path, page.read_text())
    assert [(m["id"], m["before"]) for m in r["marks"]] == [
        (c["id"], c["tokens_before"]) for c in recorded
    ]
    assert r["threshold"] is not None and r["window"] is not None
    # The plot runs from y=250 (0 tokens) up: 5000 is 5/6 of the way to 6000.
    zero = 250
    assert abs((zero - r["threshold"]["y"]) / (zero - r["window"]["y"]) - 5 / 6) < 0.01
    screenshot(tmp_path, page, "/tmp/ctxtool-export-chart-twice-screenshot.png")
    plain = run(cli, db, "context", "export", "1", "--format", "html", "--no-chart").output
    assert "<svg" not in plain and "figure" not in plain
