"""What ``pip install`` gets: the sdist and the wheel built from this tree hold every
module and data file the package loads (the Lua scripts, ``py.typed``), their metadata
names the project, its version, its dependencies and the console script, and the wheel
installed into a fresh virtualenv runs its scripts against a real Redis."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "langgraph_durable"
if not PACKAGE.is_dir():  # run against an installed wheel (.ci/wheel-check): no tree
    pytest.skip("needs the source tree", allow_module_level=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel, built as a release would build them (PEP 517, isolated
    from this environment: pip fetches the build backend)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [sys.executable, "-c", _SDIST, str(ROOT), str(out)],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


_SDIST = (
    "import sys, os; os.chdir(sys.argv[1]);"
    "from setuptools.build_meta import build_sdist; build_sdist(sys.argv[2])"
)


def _sources() -> set[str]:
    """Every file the package needs at run time, as paths inside the package."""
    wanted = {p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    return {str(p.relative_to(ROOT)) for p in wanted if p.suffix in {".py", ".lua", ".typed"}}


def test_the_wheel_holds_every_module_and_script(built: dict[str, Path]) -> None:
    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = set(wheel.namelist())
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(wheel.read(metadata_name).decode())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = wheel.read(entry_points).decode()
    missing = _sources() - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    assert any(n.startswith("langgraph_durable/io/lua/") for n in names)
    assert metadata["Name"] == "langgraph-durable"
    assert metadata["Version"]
    requires = " ".join(metadata.get_all("Requires-Dist") or [])
    for dependency in ("langgraph", "redis", "msgpack", "xxhash", "zstandard", "click"):
        assert dependency in requires, dependency
    assert "langgraph-durable = langgraph_durable.cli:main" in scripts


def test_the_sdist_holds_the_sources_and_the_readme(built: dict[str, Path]) -> None:
    with tarfile.open(built["sdist"]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    missing = (_sources() | {"README.md", "pyproject.toml"}) - names
    assert not missing, f"not in the sdist: {sorted(missing)}"


def test_the_wheel_installed_alone_runs_its_scripts(
    built: dict[str, Path], tmp_path: Path, redis_url: str
) -> None:
    """No source tree on the path: the installed package finds its Lua scripts."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The dependencies from this environment, by a plain path line: its .pth files (the
    # editable install's finder among them) are not run, so the package comes from the
    # wheel.
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--force-reinstall",
            str(built["wheel"]),
        ],
        check=True,
        capture_output=True,
    )
    code = (
        "import sys, langgraph_durable\n"
        "from langgraph_durable import RedisSaver\n"
        "assert 'site-packages' in langgraph_durable.__file__, langgraph_durable.__file__\n"
        "with RedisSaver.from_conn_string(sys.argv[1], key_prefix='lgd-packaging') as s:\n"
        "    print(s.verify('nothing-here').ok)\n"
    )
    done = subprocess.run(
        [str(python), "-c", code, redis_url],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the repository: the installed copy, not the source tree
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
