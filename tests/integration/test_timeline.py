"""``langgraph-durable timeline THREAD --html FILE`` on a thread that lived: a ToolNode agent
whose worker died after an e-mail went out, an operator's decision, two forks from one
checkpoint, a damaged newest checkpoint a worker quarantined, and a second one nobody read
yet. The page is rendered in headless Chromium (no network) and what it shows is checked
in the DOM Chromium built; nothing the page names is loaded from elsewhere."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import redis
from langchain_core.messages import HumanMessage

from langgraph_durable import RedisSaver
from tests.helpers.ledger_agent import Effects
from tests.helpers.ledger_crashes import CONFIG
from tests.helpers.redis_keys import flipped
from tests.integration.test_ledger_operators import crashed, waiting_after_a_resume

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ROOT = Path(__file__).resolve().parents[2]


def damage_newest(saver: RedisSaver, client: redis.Redis) -> str:
    tk = saver.keys.thread("t")
    newest = client.zrevrange(tk.cps, 0, 0)[0]
    record = client.hget(tk.cp, newest)
    client.hset(tk.cp, newest, flipped(record, len(record) // 2, 0x10))
    return saver.keys.parse_checkpoint_member(newest)[1]


class Dom(HTMLParser):
    """The elements of Chromium's DOM dump: their classes, data and the text inside."""

    def __init__(self) -> None:
        super().__init__()
        self.classes: list[str] = []
        self.checkpoints: list[str] = []
        self.text: list[str] = []
        self.resources: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.classes += (found.get("class") or "").split()
        if found.get("data-checkpoint"):
            self.checkpoints.append(found["data-checkpoint"])
        self.resources += [v for k, v in attrs if k in ("src", "href") and v]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def timeline(
    thread: str, page: Path | str, redis_url: str, key_prefix: str
) -> subprocess.CompletedProcess[str]:
    """``langgraph-durable timeline THREAD --html PAGE``, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "langgraph_durable.cli", "timeline", thread, "--html", str(page),
         "--redis-url", redis_url, "--key-prefix", key_prefix],
        cwd=ROOT, check=False, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def rendered(page: Path, tmp_path: Path) -> str:
    """The DOM headless Chromium builds from ``page``, every host name unresolvable."""
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--dump-dom",
            page.as_uri(),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)
def test_the_timeline_of_a_thread_that_lived_renders_what_happened(
    saver: RedisSaver,
    effects: Effects,
    redis_client: redis.Redis,
    redis_url: str,
    key_prefix: str,
    tmp_path: Path,
) -> None:
    if CHROMIUM is None:
        if os.environ.get("LGD_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is not installed, and .ci/run requires it")
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    graph, ledger = crashed(saver, effects, "send_email", point="tool_after_effect")
    (pending,) = waiting_after_a_resume(graph, ledger)
    ledger.resolve(
        "t", pending.idempotency_key, "skip", result="sent", reason="in the outbox", by="ann"
    )
    graph.invoke(None, CONFIG)
    quarantined = quarantined_id = damage_newest(saver, redis_client)
    saver.get_tuple(CONFIG)  # a worker's read: quarantined, the thread falls back
    history = list(graph.get_state_history(CONFIG))
    fork_point = history[len(history) // 2].config
    for text in ("a second thought", "a third thought"):
        graph.update_state(fork_point, {"messages": [HumanMessage(text)]})
    checkpoints = {t.checkpoint["id"] for t in saver.list(CONFIG)}
    damaged = damage_newest(saver, redis_client)  # nobody reads it before the timeline
    checkpoints.discard(damaged)

    page = tmp_path / "thread t.html"
    done = timeline("t", str(page), redis_url, key_prefix)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {page}")
    source = page.read_text()
    assert not re.search(r"(?:src|href)\s*=|url\(|@import|<script", source, re.IGNORECASE)

    dom = Dom()
    dom.feed(rendered(page, tmp_path))
    text = " ".join(" ".join(dom.text).split())
    # every one drawn, the damaged one and the one in quarantine too
    assert set(dom.checkpoints) == checkpoints | {damaged, quarantined_id}
    assert dom.classes.count("damaged") == 2 and dom.classes.count("fork") == 1
    assert f"{len(checkpoints) + 2} checkpoints, 1 forks, 2 damaged, " in text
    assert "Fallback in namespace (root)" in text and damaged in text
    assert "Lease: not held" in text
    calls = dom.classes.count("call")
    assert calls == len(ledger.entries("t")) and calls > 0
    assert "send_email" in text and "skip by ann" in text and "in the outbox" in text
    assert dom.classes.count("quarantined") >= 1 and quarantined in text
    assert "checksum mismatch" in text
    assert dom.resources == []
    # reading it changed nothing: the damaged checkpoint is still there, unmoved
    assert damaged in {f.checkpoint_id for f in saver.verify("t").findings}
    if os.environ.get("LGD_KEEP_TIMELINE"):
        shutil.copy(page, os.environ["LGD_KEEP_TIMELINE"])


def test_stored_text_is_escaped_and_cut(saver: RedisSaver, tmp_path: Path) -> None:
    from langgraph_durable.cli.timeline import MAX_SHOWN, Point, Timeline, render

    hostile = "<script>alert(1)</script>" + "x" * 1000
    page = render(
        Timeline(
            hostile,
            points=[Point(hostile, "", 0, None, "input", "")],
            leased_to='"><img src=x onerror=alert(1)>',
        )
    )
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;" in page
    assert max(len(m) for m in re.findall(r"x{10,}", page)) < MAX_SHOWN


def test_an_unknown_thread_is_one_line(redis_url: str, key_prefix: str, tmp_path: Path) -> None:
    done = timeline("nobody", str(tmp_path / "x.html"), redis_url, key_prefix)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "no such thread 'nobody'" in done.stderr
    assert not (tmp_path / "x.html").exists()


def test_a_forged_ledger_entry_is_damage_and_nothing_it_says_is_markup(
    saver: RedisSaver, effects: Effects, redis_client: redis.Redis
) -> None:
    """With the default (unsigned) envelope anyone who can write to Redis can seal a
    ledger record: fields of the wrong type make it damage, and whatever it says is
    escaped on the page."""
    import dataclasses

    from langgraph_durable.cli.timeline import gather, render
    from langgraph_durable.ledger.entries import open_entry, seal_entry

    crashed(saver, effects, "send_email", point="tool_after_effect")
    tk = saver.keys.thread("t")
    field, record = next(
        (f, r) for f, r in redis_client.hgetall(tk.lg).items() if not f.startswith(b"\x01")
    )
    entry = open_entry(saver.core, "t", field, record)
    markup = '<img src=x onerror="document.title=1">'
    for forged in (
        dataclasses.replace(entry, attempts=markup),
        dataclasses.replace(entry, escalations=(markup,)),
        dataclasses.replace(entry, state=7),
    ):
        redis_client.hset(tk.lg, field, seal_entry(saver.core, "t", forged))
        reopened = open_entry(saver.core, "t", field, redis_client.hget(tk.lg, field))
        assert reopened.state == "damaged" and "undecodable body" in (reopened.damage or "")
    redis_client.hset(
        tk.lg, field, seal_entry(saver.core, "t", dataclasses.replace(entry, error=markup))
    )
    page = render(gather(saver, "t"))
    assert "<img" not in page and "&lt;img src=x" in page


def test_a_thread_whose_index_is_damaged_says_so_and_a_big_quarantine_is_counted(
    saver: RedisSaver, redis_client: redis.Redis
) -> None:
    import msgpack

    from langgraph_durable.cli.timeline import gather, render
    from langgraph_durable.core.overview import MAX_QUARANTINE_SHOWN
    from tests.helpers import graphs

    graphs.react_graph(rounds=2).compile(checkpointer=saver).invoke(
        graphs.react_input(), {"configurable": {"thread_id": "t"}}
    )
    tk = saver.keys.thread("t")
    redis_client.delete(tk.cps)
    redis_client.set(tk.cps, "not an index")
    entries = {f"cp\x00x{i}": msgpack.packb(["checksum mismatch", b"x"]) for i in range(600)}
    redis_client.hset(tk.qt, mapping=entries)
    found = gather(saver, "t")
    assert any("checkpoint index key holds another type" in p for p in found.problems)
    assert found.quarantined == 600 and len(found.quarantine) == MAX_QUARANTINE_SHOWN
    page = render(found)
    assert f"{MAX_QUARANTINE_SHOWN} of 600 shown" in page and "600 quarantined" in page
