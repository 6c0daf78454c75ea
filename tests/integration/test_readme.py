"""The examples of the README and of docs/ run as pasted: each block marked
``<!-- example: NAME ... -->`` runs in a fresh interpreter against the test server, and
prints what it says. The quickstart is in the README itself; the others live in docs/."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from langgraph_durable import RedisSaver

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
EXAMPLE = re.compile(r"<!-- example: (\w+)[^>]*-->\n```python\n(.*?)```", re.DOTALL)
FOUND = [(name, code, page) for page in PAGES for name, code in EXAMPLE.findall(page.read_text())]
EXAMPLES = {name: code for name, code, _ in FOUND}
THREADS = {"quickstart": "quickstart", "functional": "functional"}  # what each one writes


def test_the_readme_has_its_examples() -> None:
    assert sorted(name for name, _, _ in FOUND) == sorted(THREADS)  # each once
    assert "quickstart" in dict(EXAMPLE.findall(README.read_text())), "the README's one example"


@pytest.mark.parametrize("name", sorted(THREADS))
def test_example_runs_as_pasted(name: str, redis_url: str, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_url)
    saver = RedisSaver(client)  # the examples use the default key prefix
    assert saver.core.keys.prefix == "lgd"
    saver.delete_thread(THREADS[name])  # what an earlier run left
    try:
        out = subprocess.run(
            [sys.executable, "-c", EXAMPLES[name]],
            check=False,
            env={**os.environ, "REDIS_URL": redis_url},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        expected = re.findall(r"# (\{.*\}|\d+)$", EXAMPLES[name], re.MULTILINE)
        printed = out.stdout.splitlines()
        assert printed[0] == expected[0]
        if name == "quickstart":
            assert printed[1] == "{'count': 1}", "read back from Redis"
        assert client.exists(saver.keys.thread(THREADS[name]).cp)
    finally:
        saver.delete_thread(THREADS[name])
        client.close()
