"""LangGraph's own test suite, run with our savers beside LangGraph's reference saver.

What it owns: fetching the tests of the *installed* langgraph (its sdist on PyPI, checked
against the digest PyPI lists; nothing of it is kept in this repository), choosing the test
files that take a ``sync_checkpointer`` or ``async_checkpointer`` fixture, running them in
a pytest subprocess with ``tests/upstream/lgd_upstream_plugin.py`` (which makes both
fixtures run each test twice: ``memory``, LangGraph's own InMemorySaver fixture, and
``durable``, ours on Redis), and comparing: a *regression* is a test that failed with ours
and did not fail with InMemorySaver in the same run.

``python -m tests.helpers.langgraph_suites [REDIS_URL]`` runs it by hand and prints the
comparison; ``tests/langgraph/test_langgraph_suites.py`` runs it in the suite.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

PLUGIN_DIR = Path(__file__).resolve().parent.parent / "upstream"
PLUGIN = "lgd_upstream_plugin"
# PEP 691's JSON form of the simple index (what pip reads; every PyPI mirror serves it)
SIMPLE_INDEX = os.environ.get("LGD_SIMPLE_INDEX", "https://pypi.org/simple")
FIXTURES = ("sync_checkpointer", "async_checkpointer")
FAILED = ("failed", "error")


class SuiteUnavailable(RuntimeError):
    """LangGraph's tests could not be fetched or no longer have the shape we rely on."""


def fetch_tests(cache_dir: Path, project: str = "langgraph") -> Path:
    """The ``tests`` folder of the installed ``project``'s sdist, unpacked under
    ``cache_dir`` (downloaded once per version; the archive's SHA-256 checked against
    PyPI's)."""
    version = importlib.metadata.version(project)
    root = cache_dir / f"{project}-{version}"
    if (root / "tests" / "conftest.py").is_file():
        return root / "tests"
    try:
        request = urllib.request.Request(
            f"{SIMPLE_INDEX}/{project}/",
            headers={"Accept": "application/vnd.pypi.simple.v1+json"},
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            files = json.load(reply)["files"]
        sdist = next(f for f in files if f["filename"] == f"{project}-{version}.tar.gz")
        with urllib.request.urlopen(sdist["url"], timeout=300) as reply:
            archive = reply.read()
    except (OSError, StopIteration, KeyError, ValueError) as exc:
        raise SuiteUnavailable(
            f"could not fetch the sdist of {project} {version}: {exc!r}"
        ) from exc
    if hashlib.sha256(archive).hexdigest() != sdist["hashes"]["sha256"]:
        raise SuiteUnavailable(f"the sdist of {project} {version} does not match PyPI's digest")
    staging = Path(tempfile.mkdtemp(prefix="lgd-sdist-", dir=cache_dir))
    try:
        archive_path = staging / sdist["filename"]
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            top = f"{project}-{version}/"
            members = [m for m in tar.getmembers() if m.name.startswith(top + "tests/")]
            # data_filter refuses links out of the folder and absolute paths
            tar.extractall(staging, members=members, filter="data")
        unpacked = staging / f"{project}-{version}"
        # their pyproject carries their pytest options (asyncio mode, markers)
        with tarfile.open(archive_path) as tar:
            tar.extractall(staging, members=[tar.getmember(top + "pyproject.toml")], filter="data")
        shutil.rmtree(root, ignore_errors=True)
        unpacked.rename(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root / "tests"


def checkpointer_test_files(tests: Path) -> list[str]:
    """The test files that take one of LangGraph's checkpointer fixtures."""
    return sorted(
        f"tests/{path.name}"
        for path in tests.glob("test_*.py")
        if any(name in path.read_text(encoding="utf-8") for name in FIXTURES)
    )


def use_our_fixtures(tests: Path) -> None:
    """Make LangGraph's conftest take its checkpointer fixtures from our plugin: one
    import appended to it (a later binding of a name replaces the earlier one)."""
    conftest = tests / "conftest.py"
    text = conftest.read_text(encoding="utf-8")
    for name in FIXTURES:
        if f"def {name}(" not in text:
            raise SuiteUnavailable(f"LangGraph's tests/conftest.py no longer defines {name}")
    line = f"from {PLUGIN} import async_checkpointer, sync_checkpointer  # noqa\n"
    if line not in text:
        conftest.write_text(text + "\n" + line, encoding="utf-8")


@dataclass
class Comparison:
    """The two checkpointers' outcomes of each test, and what that says."""

    rows: list[dict]
    regressions: list[dict] = field(default_factory=list)
    unpaired: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        by_case: dict[str, dict[str, dict]] = {}
        for row in self.rows:
            by_case.setdefault(row["case"], {})[row["variant"]] = row
        for case, variants in sorted(by_case.items()):
            if set(variants) != {"memory", "durable"}:
                self.unpaired.append(case)
                continue
            ours, reference = variants["durable"], variants["memory"]
            if ours["outcome"] in FAILED and reference["outcome"] not in FAILED:
                self.regressions.append(ours)

    def count(self, variant: str, outcome: str) -> int:
        return sum(1 for r in self.rows if r["variant"] == variant and r["outcome"] == outcome)

    def summary(self) -> str:
        parts = []
        for variant in ("durable", "memory"):
            counts = {o: self.count(variant, o) for o in
                      ("passed", "failed", "error", "skipped", "xfailed")}  # fmt: skip
            parts.append(f"{variant}: " + ", ".join(f"{n} {o}" for o, n in counts.items() if n))
        return "; ".join(parts) + f"; {len(self.regressions)} regressions"

    def explain(self) -> str:
        lines = [self.summary()]
        for row in self.regressions:
            lines.append(f"REGRESSION {row['nodeid']}\n    {row['detail'][:600]}")
        for case in self.unpaired:
            lines.append(f"UNPAIRED {case} (ran with one checkpointer only)")
        return "\n".join(lines)


def run_suite(
    tests: Path, redis_url: str, *, workers: int = 2, extra_args: tuple[str, ...] = ()
) -> Comparison:
    """Run LangGraph's checkpointer tests with both checkpointers; the comparison."""
    use_our_fixtures(tests)
    files = checkpointer_test_files(tests)
    if not files:
        raise SuiteUnavailable("no LangGraph test file takes a checkpointer fixture")
    results = tests.parent / "lgd-results.json"
    results.unlink(missing_ok=True)
    env = {
        **os.environ,
        "LGD_UPSTREAM_REDIS_URL": redis_url,
        "LGD_UPSTREAM_RESULTS": str(results),
        # their fixtures then need no Docker: caches and stores in memory and SQLite
        "NO_DOCKER": "true",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(PLUGIN_DIR), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    env.pop("PYTEST_ADDOPTS", None)
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", PLUGIN, "-p", "no:cacheprovider",
        "-o", "addopts=", "--rootdir", str(tests.parent), *files, *extra_args,
    ]  # fmt: skip
    if workers > 1:
        command += ["-n", str(workers)]
    proc = subprocess.run(
        command,
        check=False,
        cwd=tests.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if not results.is_file():
        raise SuiteUnavailable(
            f"LangGraph's tests wrote no results (exit {proc.returncode}):\n"
            + (proc.stdout[-3000:] + proc.stderr[-3000:])
        )
    return Comparison(json.loads(results.read_text(encoding="utf-8")))


def main() -> int:
    url = (
        sys.argv[1] if len(sys.argv) > 1 else os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
    )
    cache = Path(os.environ.get("LGD_UPSTREAM_CACHE", tempfile.gettempdir())) / "lgd-upstream"
    cache.mkdir(parents=True, exist_ok=True)
    comparison = run_suite(fetch_tests(cache), url)
    print(comparison.explain())
    return 1 if comparison.regressions or comparison.unpaired else 0


if __name__ == "__main__":
    sys.exit(main())
