"""The timeline tells the demo's story, checked in headless Chromium at 1280 px.

``langgraph-durable demo --damage`` kills a worker in its tools step, damages the newest
checkpoint and resumes in a fresh worker (whose read quarantines it and falls back).
Its timeline must show: every checkpoint with its time, node(s) and step; the resume (the
gap, the step that ran again); the quarantined checkpoint on the lane at its step with
where reads fall back to; the tool results as their content; the escalation as what it
was and how it was answered; an operator's acknowledgement once given; and no word
broken across lines. Layout is measured by a script run in a copy of the page (the page
itself has none); a screenshot of the page goes in the test's output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.helpers.redis_keys import delete_prefix
from tests.integration.test_timeline import CHROMIUM, ROOT, Dom, rendered, timeline

WIDTH = 1280
# Where a word is split over two lines, unless the text itself offers the break there
# (after a hyphen, a slash or a comma): Chromium's own layout, read back.
MEASURE = """<script>
const broken = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
const lineOf = (node, i) => {
  const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
  const rects = r.getClientRects(); return rects.length ? Math.round(rects[0].top) : null;
};
while (walker.nextNode()) {
  const node = walker.currentNode;
  if (node.parentElement.closest('svg')) continue;
  const words = /\\S+/g; let m;
  while ((m = words.exec(node.data))) {
    for (let i = m.index + 1; i < m.index + m[0].length; i++) {
      const a = lineOf(node, i - 1), b = lineOf(node, i);
      if (a !== null && b !== null && b > a && !'-/,'.includes(node.data[i - 1])) {
        broken.push(m[0]); break;
      }
    }
  }
}
const out = document.createElement('pre'); out.id = 'layout';
out.textContent = JSON.stringify({broken, width: document.documentElement.clientWidth});
document.body.appendChild(out);
</script>"""

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("LGD_REQUIRE_CHROMIUM"),
    reason="Debian's chromium is not installed (.ci/run installs it)",
)


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "langgraph_durable.cli", *args],
        cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def demo(redis_url: str) -> Iterator[tuple[dict[str, str], dict[str, Any]]]:
    prefix = f"lgdtl{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "REDIS_URL": redis_url, "LGD_PREFIX": prefix}
    done = cli(["demo", "--damage", "--delay", "0.3", "--json", "--key-prefix", prefix], env)
    yield env, json.loads(done.stdout)
    client = redis.Redis.from_url(redis_url)
    delete_prefix(client, prefix)
    client.close()


def page_of(demo: Any, tmp_path: Path, redis_url: str) -> tuple[Path, str]:
    env, verdict = demo
    if CHROMIUM is None:
        pytest.fail("chromium is not installed, and .ci/run requires it")
    page = tmp_path / "timeline.html"
    done = timeline(verdict["thread_id"], page, redis_url, env["LGD_PREFIX"])
    assert done.returncode == 0, done.stderr
    dom = Dom()
    dom.feed(rendered(page, tmp_path))
    return page, " ".join(" ".join(dom.text).split())


def layout(page: Path, tmp_path: Path) -> dict[str, Any]:
    """What ``MEASURE`` found in a copy of ``page`` laid out at WIDTH px."""
    measured = tmp_path / "measured.html"
    measured.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={WIDTH},900",
         "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp_path / 'measure'}",
         "--dump-dom", measured.as_uri()],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = re.search(r'<pre id="layout">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found, "the measuring script ran"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def screenshot(page: Path, tmp_path: Path) -> Path:
    shot = tmp_path / "timeline.png"
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={WIDTH},1400",
         "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp_path / 'shot'}",
         f"--screenshot={shot}", page.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    print(f"timeline screenshot: {shot}")  # the test's output names it
    if os.environ.get("LGD_KEEP_TIMELINE"):
        shutil.copy(shot, os.environ["LGD_KEEP_TIMELINE"])
    return shot


def test_the_demos_timeline_tells_what_happened(demo: Any, tmp_path: Path, redis_url: str) -> None:
    _, verdict = demo
    page, text = page_of(demo, tmp_path, redis_url)
    assert screenshot(page, tmp_path).stat().st_size > 0
    source = page.read_text()
    # every checkpoint: its step, its time, the node that wrote it
    labels = re.findall(r"<text [^>]*>(step [^<]*)</text>", source)
    assert labels and all(re.search(r"\d\d:\d\d:\d\d\.\d{3}", label) for label in labels)
    assert any(" · agent · " in label for label in labels)
    assert any(" · tools · " in label for label in labels)
    # the resume: a gap, and the step the kill hit ran again
    interrupted = verdict["interrupted_step"]
    assert "resumed after" in text and "the run stopped there" in text
    assert f"step {interrupted} ran again" in text
    # ... by the worker that went on, named (host:pid), not the one SIGKILLed
    assert f"ran again in worker {verdict['worker']}" in text
    assert any(
        label.startswith(f"step {interrupted} ") and "ran again" in label for label in labels
    )
    # the quarantined checkpoint at its step, with where reads fall back to
    damaged = verdict["damaged_checkpoint"]
    assert f'class="damaged" data-checkpoint="{damaged}"' in source
    (drawn,) = [label for label in labels if damaged[-8:] in label]
    assert "DAMAGED" in drawn and "reads fall back to" in drawn
    assert f"checkpoint {damaged} (step " in text and "reads fall back to checkpoint" in text
    # tool results as what they say; the escalation as what it was and its answer
    assert "charged acme 49.00 USD" in text
    assert "content=" not in text and "tool_call_id=" not in text
    assert "asked #0 (outcome unknown): answered retry" in text
    # nothing broken mid-word at 1280 px
    measured = layout(page, tmp_path)
    assert measured["width"] <= WIDTH and measured["broken"] == []


def test_an_acknowledgement_is_on_the_timeline(demo: Any, tmp_path: Path, redis_url: str) -> None:
    env, verdict = demo
    thread = verdict["thread_id"]
    cli(["acknowledge", thread, "--reason", "flipped on purpose", "--by", "ann",
         "--redis-url", redis_url, "--key-prefix", env["LGD_PREFIX"]], env)  # fmt: skip
    page, text = page_of(demo, tmp_path, redis_url)
    assert "Acknowledged by ann" in text and "flipped on purpose" in text
    assert "quarantined records acknowledged by ann: flipped on purpose" in text
    assert layout(page, tmp_path)["broken"] == []
