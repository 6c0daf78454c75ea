"""The notebooks run top to bottom (each asserts what it shows), so they cannot rot."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
import redis
from nbclient import NotebookClient

from tests.helpers.redis_keys import delete_prefix

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.fixture
def notebook_prefix(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    prefix = f"lgdnb{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("LGD_KEY_PREFIX", prefix)
    yield prefix
    client = redis.Redis.from_url(redis_url)
    delete_prefix(client, prefix)
    client.close()


def test_there_are_three_notebooks() -> None:
    assert [p.name for p in NOTEBOOKS] == [
        "01_crash_and_resume.ipynb",
        "02_damaged_checkpoint.ipynb",
        "03_tool_ledger.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, notebook_prefix: str, tmp_path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    # a failing cell raises CellExecutionError, naming the cell and its traceback
    NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    ).execute()
    assert all(c.execution_count for c in notebook.cells if c.cell_type == "code")
