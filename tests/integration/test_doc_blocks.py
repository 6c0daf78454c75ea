"""Every Python block of README.md and docs/ runs as pasted.

Each block runs alone in a fresh interpreter, in an empty folder, and all of them run in
page order against one Redis server of their own (``REDIS_URL``), as a reader pasting
them one after the other into one Redis would: so every example finds Redis the
README's way (``REDIS_URL``, else the embedded server), never a server nobody named,
and no two pages use one thread id. A block prints what its comments say: a line ``print(...)  # TEXT``
expects ``TEXT`` among the lines it prints, in that order. A block that needs what the
tests cannot start (a Cluster at a fixed address, TLS certificates, a paid model) is
preceded by ``<!-- needs: WHAT -->`` and is not run; those stay few. The migration
example gets a PostgreSQL database holding one LangGraph thread (``PG_URL``) when a
server answers on this machine, and is skipped otherwise.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from langgraph_durable import RedisSaver
from tests.helpers.postgres import own_database
from tests.helpers.servers import start_server

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
NEEDS = re.compile(r"<!-- needs: ([^>]+?) -->\n$")
EXPECTED = re.compile(r"^\s*print\(.*\)\s+# (.+)$", re.MULTILINE)
MAX_NOT_RUN = 4  # the issue: blocks that need infrastructure stay few


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    code: str
    needs: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in BLOCK.finditer(text):
            before = text[: match.start()]
            needs = NEEDS.search(before)
            found.append(
                Block(page, before.count("\n") + 1, match.group(1), needs and needs.group(1))
            )
    return found


BLOCKS = blocks()
QUICKSTART = next(b.code for b in BLOCKS if b.page.name == "README.md")


def test_the_blocks_are_found_and_few_need_infrastructure() -> None:
    assert len(BLOCKS) >= 12, [b.name for b in BLOCKS]
    assert [b for b in BLOCKS if b.page.name == "README.md"], "the README's one example"
    not_run = [f"{b.name} ({b.needs})" for b in BLOCKS if b.needs]
    assert len(not_run) <= MAX_NOT_RUN, not_run


THREAD_ID = re.compile(r"""["']thread_id["']\s*:\s*["']([^"']+)["']""")


def test_every_block_finds_redis_the_readmes_way_and_pages_keep_their_thread_ids() -> None:
    owners: dict[str, set[str]] = {}
    for block in BLOCKS:
        assert "localhost:6379" not in block.code and "127.0.0.1:6379" not in block.code, (
            f"{block.name} falls back to a Redis nobody named"
        )
        if "REDIS_URL" in block.code and not block.needs:
            assert "EmbeddedRedis().start()" in block.code, block.name
        for thread_id in THREAD_ID.findall(block.code):
            owners.setdefault(thread_id, set()).add(block.page.name)
    shared = {t: sorted(pages) for t, pages in owners.items() if len(pages) > 1}
    assert not shared, f"thread ids used on more than one page: {shared}"


@pytest.fixture(scope="module")
def shared_redis_url() -> Iterator[str]:
    """One server for every block, as a reader's own Redis."""
    workdir = tempfile.mkdtemp(prefix="lgd-docs-")
    server = start_server(workdir)
    try:
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def private_redis_url() -> Iterator[str]:
    workdir = tempfile.mkdtemp(prefix="lgd-docs-")
    server = start_server(workdir)
    try:
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def postgres_with_a_thread() -> Iterator[str]:
    """A database of its own on the machine's PostgreSQL, holding one LangGraph thread."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import START, MessagesState, StateGraph

    with own_database("lgd_docs") as url:
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            builder = StateGraph(MessagesState)
            builder.add_node("answer", lambda state: {"messages": [("ai", "hi")]})
            builder.add_edge(START, "answer")
            graph = builder.compile(checkpointer=saver)
            graph.invoke({"messages": [("user", "hello")]}, {"configurable": {"thread_id": "pg-1"}})
        yield url


@pytest.mark.parametrize("block", [b for b in BLOCKS if not b.needs], ids=lambda b: b.name)
def test_every_python_block_runs_as_pasted(
    block: Block, shared_redis_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = {**os.environ, "REDIS_URL": shared_redis_url}
    if "PG_URL" in block.code:
        env["PG_URL"] = request.getfixturevalue("postgres_with_a_thread")
    out = subprocess.run(
        [sys.executable, "-c", block.code],
        check=False,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, f"{block.name}\n{out.stderr}"
    printed = iter(out.stdout.splitlines())
    for expected in EXPECTED.findall(block.code):
        assert any(line == expected for line in printed), (block.name, expected, out.stdout)


def test_the_quickstart_leaves_its_thread_in_redis(private_redis_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "REDIS_URL": private_redis_url}
    ran = subprocess.run(
        [sys.executable, "-c", QUICKSTART], check=False, env=env, cwd=tmp_path, timeout=120
    )
    assert ran.returncode == 0
    client = redis.Redis.from_url(private_redis_url)
    try:
        saver = RedisSaver(client)  # the examples use the default key prefix
        assert saver.core.keys.prefix == "lgd"
        assert saver.get_tuple({"configurable": {"thread_id": "quickstart"}}) is not None
    finally:
        client.close()
