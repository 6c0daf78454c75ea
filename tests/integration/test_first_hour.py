"""A new user's first hour with the command line (issue 30, point 4): the demo ends with
the commands that show its thread, and they work; a command that starts the embedded
server says so once, with how to stop it; only ``demo`` and ``server start`` start it;
``show`` names an unknown checkpoint; an empty listing says so; ``verify --all`` ends
with a count; every error is one line in one style; the demo leaves no temporary folder.

Real Redis throughout: the session's test server (``redis_url``, under the test's own key
prefix), or a private embedded server in the test's temporary directory, stopped after.
Commands run as a user runs them (the installed console script, in a subprocess) where
the process's output and exit code matter, else in-process with click's ``CliRunner``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import RedisSaver
from langgraph_durable.core.redact import redact_url
from langgraph_durable.tools.embedded import EmbeddedRedis
from tests.helpers.graphs import counter_graph
from tests.helpers.redis_keys import flip_last_bit

ROOT = Path(__file__).resolve().parents[2]
BIN = str(Path(sys.executable).parent / "langgraph-durable")  # the installed console script
STARTED = "langgraph-durable started a Redis server in the background"
NO_SERVER = "langgraph-durable: no Redis server is running"


def user_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A user's environment with no REDIS_URL, an embedded server of their own (data
    under ``tmp_path``) and temporary files under ``tmp_path / "tmp"``."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "LGD_KEY_PREFIX")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**env, "LGD_DATA_DIR": str(tmp_path / "data"), "TMPDIR": str(tmp_path / "tmp"), **extra}


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BIN, *args], check=False, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Any:
    from langgraph_durable.cli import cli

    return CliRunner().invoke(
        cli,
        list(args),
        env={"LGD_SIGNING_KEY": None, **(env or {})},
        catch_exceptions=False,  # an exception reaching click is a failure here
        prog_name="langgraph-durable",
    )


def one_error_line(stderr: str) -> str:
    """The only line on stderr, in echo_error's style (never "Error:", a usage block or a
    traceback)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("langgraph-durable: "), stderr
    assert "Traceback" not in stderr and "Usage:" not in stderr
    assert not lines[0].startswith("langgraph-durable: Error")
    return lines[0]


PROGRAM = re.compile(r"(?:\S*/)?langgraph-durable ")  # as PATH finds it, or its path


def printed_commands(stdout: str) -> list[list[str]]:
    """The commands the demo's last lines tell the user to run, as argv."""
    tail = stdout.split("VERDICT:", 1)[1]
    return [
        shlex.split(line[match.start() :])
        for line in tail.splitlines()
        if (match := PROGRAM.search(line))
    ]


def run_printed(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """A printed command run as printed, from the folder the user is in (the clone's: the
    README's first command never activates the virtual environment)."""
    return subprocess.run(
        command, check=False, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def runnable_as_printed(program: str) -> bool:
    """Whether the program a printed command names runs from the clone's folder."""
    return bool(shutil.which(program, path=os.environ.get("PATH"))) or (ROOT / program).exists()


def leftover_demo_folders(tmp_path: Path) -> list[str]:
    return [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("lgd-demo-")]


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """The user's embedded server (data in ``tmp_path / "data"``): stopped after the test
    if it runs then."""
    server = EmbeddedRedis(tmp_path / "data")
    yield server
    server.stop()


# -- 1, 2, 3, 8: the demo on the embedded server, its commands, stopping it --------------
def test_demo_on_the_embedded_server_says_once_it_started_it_and_prints_working_commands(
    tmp_path: Path, embedded: EmbeddedRedis
) -> None:
    env = user_env(tmp_path)
    first = run(["demo", "--delay", "0.1"], env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "VERDICT: OK" in first.stdout
    # It started a server that keeps running: one line says so, and how to stop it.
    (started,) = [line for line in first.stderr.splitlines() if STARTED in line]
    assert re.search(r"`\S*langgraph-durable server stop` stops it", started), started
    assert (first.stdout + first.stderr).count("server stop") == 1
    port = embedded.running_port()
    assert port is not None and f"redis://127.0.0.1:{port}/0" in started

    # The commands it ends with show its thread (prefix lgd-demo), as printed.
    commands = printed_commands(first.stdout)
    assert len(commands) == 2 and all(runnable_as_printed(c[0]) for c in commands), commands
    assert all("--redis-url" not in c for c in commands), "the CLI finds the embedded server"
    thread = re.search(r"thread (demo-[0-9a-f]{8})", first.stdout).group(1)
    listed = run_printed([*commands[0], "--json"], env)
    assert listed.returncode == 0, listed.stderr
    assert [t["thread_id"] for t in json.loads(listed.stdout)] == [thread]
    assert thread in run_printed(commands[0], env).stdout  # as printed, for a human
    ledger = run_printed(commands[1], env)
    assert ledger.returncode == 0, ledger.stderr
    assert "charge_card" in ledger.stdout and "send_email" in ledger.stdout

    # A second demo reuses the server: nothing more to say about it.
    second = run(["demo", "--delay", "0.1", "--json"], env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert STARTED not in second.stderr and "server stop" not in second.stderr
    assert json.loads(second.stdout)["exactly_once"] is True
    assert leftover_demo_folders(tmp_path) == [], "a demo left its temporary folder"

    # Stopped by the user: a read-only command does not start it again.
    assert run(["server", "stop"], env).stdout.strip() == "stopped"
    after = run_printed(commands[0], env)
    assert after.returncode == 2
    assert one_error_line(after.stderr).startswith(NO_SERVER)
    assert "langgraph-durable server start" in after.stderr and "--redis-url" in after.stderr
    assert embedded.running_port() is None
    assert run(["server", "status"], env).returncode == 3


def test_demo_on_a_given_server_prints_commands_that_work_without_its_environment(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    env = user_env(tmp_path, REDIS_URL=redis_url)
    done = run(["demo", "--delay", "0.1", "--key-prefix", key_prefix], env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert STARTED not in done.stderr, "no embedded server was started"
    commands = printed_commands(done.stdout)
    assert len(commands) == 2
    if redact_url(redis_url) != redis_url:  # a password is never printed: REDIS_URL it is
        elsewhere = env
    else:  # the printed commands name the server and the prefix; no REDIS_URL needed
        elsewhere = user_env(tmp_path)
        assert all(c[c.index("--redis-url") + 1] == redis_url for c in commands)
    assert all(c[c.index("--key-prefix") + 1] == key_prefix for c in commands)
    thread = re.search(r"thread (demo-[0-9a-f]{8})", done.stdout).group(1)
    listed = run_printed([*commands[0], "--json"], elsewhere)
    assert listed.returncode == 0, listed.stderr
    assert [t["thread_id"] for t in json.loads(listed.stdout)] == [thread]
    entries = json.loads(run_printed([*commands[1], "--json"], elsewhere).stdout)
    assert [e["tool"] for e in entries] == ["charge_card", "send_email", "write_report"] + [
        "send_email"
    ]
    assert leftover_demo_folders(tmp_path) == []


# -- 2: whatever starts the server says so once, with the command that stops it --------
def test_server_start_and_the_quickstart_say_once_that_a_server_runs_and_how_to_stop_it(
    tmp_path: Path, embedded: EmbeddedRedis
) -> None:
    from tests.integration.test_doc_blocks import QUICKSTART

    # --data-dir elsewhere than the default: the stop command says which server.
    env = user_env(tmp_path, XDG_DATA_HOME=str(tmp_path / "xdg"))
    del env["LGD_DATA_DIR"]
    other = tmp_path / "other dir"
    try:
        started = run(["server", "start", "--data-dir", str(other)], env)
        assert started.returncode == 0, started.stderr
        (line,) = [x for x in started.stderr.splitlines() if "server stop" in x]
        assert line.startswith(STARTED) and started.stdout.strip() in line
        stop = re.search(r"`(\S*langgraph-durable server stop[^`]*)`", line).group(1)
        assert stop.endswith(f"langgraph-durable server stop --data-dir {shlex.quote(str(other))}")
        again = run(["server", "start", "--data-dir", str(other)], env)
        assert again.stdout == started.stdout  # reused, and said once only
        assert STARTED not in again.stderr and "server stop" not in again.stderr
        assert run_printed(shlex.split(stop), env).stdout.strip() == "stopped"  # as printed
    finally:
        EmbeddedRedis(other).stop()

    # The README's quickstart on the embedded server (no REDIS_URL): said once too.
    env = user_env(tmp_path)
    first = subprocess.run(
        [sys.executable, "-c", QUICKSTART],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[0] == "{'count': 1}"
    (line,) = [x for x in first.stderr.splitlines() if "server stop" in x]
    assert line.startswith(STARTED) and re.search(r"`\S*langgraph-durable server stop` stops", line)
    assert embedded.running_port() is not None
    second = subprocess.run(
        [sys.executable, "-c", QUICKSTART],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert second.returncode == 0, second.stderr
    assert STARTED not in second.stderr and "server stop" not in second.stderr


# -- 3: only demo and server start start the embedded server ----------------------------
@pytest.mark.parametrize(
    "command",
    [
        ["threads"],
        ["history", "t"],
        ["show", "t"],
        ["show", "t", "1ef"],
        ["ledger", "t"],
        ["escalations"],
        ["verify", "t"],
        ["verify", "--all"],
        ["verify", "--all", "--repair"],
        ["resolve", "t", "key", "--retry"],
        ["drop", "t", "key", "--reason", "r"],
        ["migrate", "--from", "sqlite:///{tmp}/source.db"],
    ],
    ids=lambda c: " ".join(c[:3]),
)
def test_no_other_command_starts_the_embedded_server(
    tmp_path: Path, embedded: EmbeddedRedis, command: list[str]
) -> None:
    if "--from" in command:  # a source that opens: the command gets as far as Redis
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(str(tmp_path / "source.db")) as source:
            source.setup()
    command = [a.replace("{tmp}", str(tmp_path)) for a in command]
    env: dict[str, str | None] = {"REDIS_URL": None, "LGD_DATA_DIR": str(embedded.data_dir)}
    for state in ("never started", "stopped by the user"):
        if state == "stopped by the user":
            embedded.start()
            assert embedded.stop()
        done = invoke(*command, env=env)
        assert done.exit_code == 2, (state, done.output)
        assert one_error_line(done.stderr).startswith(NO_SERVER), (state, done.stderr)
        assert f"data in {embedded.data_dir}" in done.stderr
        assert re.search(r"`\S*langgraph-durable server start`", done.stderr), done.stderr
        assert "--redis-url or REDIS_URL" in done.stderr
        assert embedded.running_port() is None, f"{command[0]} started the server ({state})"


# -- 4: an unknown checkpoint of a thread that exists is named --------------------------
def test_show_names_an_unknown_checkpoint_of_a_thread_that_exists(
    saver: RedisSaver, redis_url: str, key_prefix: str
) -> None:
    config = {"configurable": {"thread_id": "t"}}
    counter_graph().compile(checkpointer=saver).invoke({"value": 1, "trail": []}, config)
    where = ["--redis-url", redis_url, "--key-prefix", key_prefix]
    bogus = "1f0ffff0-0000-6000-8000-000000000000"
    for extra in ([], ["--json"]):
        done = invoke("show", "t", bogus, *where, *extra)
        assert done.exit_code == 1, done.output
        line = one_error_line(done.stderr)
        assert f"unknown checkpoint {bogus!r}" in line and "thread 't' exists" in line
        assert done.stdout == ""
    missing = invoke("show", "nobody", bogus, *where)
    assert missing.exit_code == 1
    assert one_error_line(missing.stderr) == (
        f"langgraph-durable: no such thread 'nobody' (key prefix {key_prefix!r})"
    )
    newest = saver.get_tuple(config).config["configurable"]["checkpoint_id"]
    assert invoke("show", "t", newest, *where).exit_code == 0  # a known one still shows


# -- 5: an empty listing is one line; --json stays a list -------------------------------
def test_empty_listings_say_so_in_one_line_and_json_is_an_empty_list(
    saver: RedisSaver, redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    where = ["--redis-url", redis_url, "--key-prefix", key_prefix]
    p = repr(key_prefix)
    signed = {"LGD_SIGNING_KEY": "a-signing-key-0123456789"}
    for args, line, env in [
        (["threads"], f"no threads under key prefix {p}", None),
        (["escalations"], f"no escalations under key prefix {p}", None),
        (["resign", "--all"], f"no threads under key prefix {p}", signed),
    ]:
        done = invoke(*args, *where, env=env)
        assert done.exit_code == 0 and done.stdout == line + "\n", (args, done.output)
        as_json = invoke(*args, *where, "--json", env=env)
        assert as_json.exit_code == 0 and json.loads(as_json.stdout) == [], args

    # A thread with checkpoints but no ledger entry, and none waiting for a human.
    counter_graph().compile(checkpointer=saver).invoke(
        {"value": 1, "trail": []}, {"configurable": {"thread_id": "t"}}
    )
    # A thread whose only checkpoint was damaged and moved to its quarantine.
    config = saver.put(
        {"configurable": {"thread_id": "hurt", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {}
    )
    tk = saver.keys.thread("hurt")
    flip_last_bit(
        redis_client,
        tk.cp,
        saver.keys.checkpoint_member("", config["configurable"]["checkpoint_id"]),
    )
    assert invoke("verify", "hurt", "--repair", *where).exit_code == 1  # quarantined: not ok
    for args, line in [
        (["ledger", "t"], f"no ledger entries in thread 't' (key prefix {p})"),
        (["escalations", "--thread", "t"], f"no escalations in thread 't' (key prefix {p})"),
        (
            ["escalations", "--thread", "t", "--thread", "hurt"],
            f"no escalations in threads 't', 'hurt' (key prefix {p})",
        ),
        (["history", "hurt"], f"no checkpoints in thread 'hurt' (key prefix {p})"),
    ]:
        done = invoke(*args, *where)
        assert done.exit_code == 0 and done.stdout == line + "\n", (args, done.output)
        as_json = invoke(*args, *where, "--json")
        assert as_json.exit_code == 0 and json.loads(as_json.stdout) == [], args
    listed = invoke("threads", *where).stdout.splitlines()
    assert listed[0].startswith("THREAD") and listed[1].startswith("t ")  # rows: a table


def test_empty_listing_lines_are_escaped(redis_url: str, key_prefix: str) -> None:
    hostile = "t\x1b]0;pwned\x07\u202e"
    done = invoke(
        "escalations", "--thread", hostile, "--redis-url", redis_url, "--key-prefix", key_prefix
    )
    assert done.exit_code == 0
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout
    assert "t\\x1b]0;pwned\\x07\\u202e" in done.stdout


# -- 6: verify --all counts what it checked ---------------------------------------------
def test_verify_all_ends_with_a_count_of_threads_checked_ok_damaged_and_repaired(
    saver: RedisSaver, redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    graph = counter_graph().compile(checkpointer=saver)
    for thread in ("fine", "hurt"):
        graph.invoke({"value": 1, "trail": []}, {"configurable": {"thread_id": thread}})
    newest = saver.get_tuple({"configurable": {"thread_id": "hurt"}})
    flip_last_bit(
        redis_client,
        saver.keys.thread("hurt").cp,
        saver.keys.checkpoint_member("", newest.config["configurable"]["checkpoint_id"]),
    )
    where = ["--redis-url", redis_url, "--key-prefix", key_prefix]
    checked = invoke("verify", "--all", *where)
    assert checked.exit_code == 1
    assert checked.stdout.splitlines()[-1] == "2 threads checked: 1 ok, 1 damaged"
    assert "fine: ok" in checked.stdout and "hurt: DAMAGED" in checked.stdout
    as_json = json.loads(invoke("verify", "--all", "--json", *where).stdout)
    assert [r["thread_id"] for r in as_json] == ["fine", "hurt"]  # JSON: as before, rows only

    repaired = invoke("verify", "--all", "--repair", *where)
    assert repaired.exit_code == 1  # the moved checkpoint is quarantined: not ok
    assert repaired.stdout.splitlines()[-1] == "2 threads checked: 1 ok, 1 damaged, 1 repaired"
    again = invoke("verify", "--all", "--repair", *where)  # nothing left to move
    assert again.stdout.splitlines()[-1] == "2 threads checked: 1 ok, 1 damaged, 0 repaired"
    single = invoke("verify", "fine", *where)  # one named thread: its line is enough
    assert single.exit_code == 0 and single.stdout.strip() == "fine: ok (5 intact checkpoints)"


# -- 7: every error one line, one style, never a traceback ------------------------------
@pytest.fixture
def wrong_type_lease(saver: RedisSaver, redis_client: redis.Redis) -> str:
    """A thread whose lease key holds a hash: what no command expects to read."""
    counter_graph().compile(checkpointer=saver).invoke(
        {"value": 1, "trail": []}, {"configurable": {"thread_id": "odd"}}
    )
    redis_client.hset(saver.keys.thread("odd").lease, "not", "a lease")
    return "odd"


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["show"], 2, "bad input: Missing argument 'THREAD'"),
        (["--bogus"], 2, "bad input: No such option '--bogus'"),
        (["nocommand"], 2, "bad input: No such command 'nocommand'"),
        (["verify"], 2, "bad input: name a THREAD or pass --all"),
        (["demo", "--delay", "-1"], 2, "bad input: Invalid value for '--delay'"),
        (
            ["threads", "--signing-key-file", "/nonexistent/keys"],
            2,
            "bad input: Invalid value for --signing-key-file: cannot read /nonexistent/keys",
        ),
        (["history", "nobody"], 1, "no such thread 'nobody'"),
        (["show", "nobody"], 1, "no such thread 'nobody'"),
        (["verify", "--all"], 1, "no threads under key prefix"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_every_error_is_one_line_in_one_style(
    request: pytest.FixtureRequest,
    redis_url: str,
    key_prefix: str,
    tmp_path: Path,
    args: list[str],
    code: int,
    message: str,
) -> None:
    env = {"REDIS_URL": redis_url, "LGD_DATA_DIR": str(tmp_path)}
    done = invoke(*([*args, "--key-prefix", key_prefix] if args[0] != "--bogus" else args), env=env)
    assert done.exit_code == code, done.output
    line = one_error_line(done.stderr)
    assert line.startswith(f"langgraph-durable: {message}"), line
    if "bad input" in message:  # a usage error points at the command's help, same line
        group_level = args[0] in ("--bogus", "nocommand")
        where = "langgraph-durable" if group_level else f"langgraph-durable {args[0]}"
        assert line.endswith(f"(see `{where} --help`)"), line


def test_a_damaged_lease_key_shows_in_the_listing(
    wrong_type_lease: str, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    """A key of the wrong type is damage the listing shows, not an error that ends it."""
    env = {"REDIS_URL": redis_url, "LGD_DATA_DIR": str(tmp_path)}
    done = invoke("threads", "--key-prefix", key_prefix, env=env)
    assert done.exit_code == 0, done.output
    (row,) = [line for line in done.output.splitlines() if line.startswith(wrong_type_lease)]
    assert row.split()[-1] == "damaged"


def test_an_unforeseen_failure_is_one_line_with_exit_1(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What no command answers itself (here a failure inside the listing) is one line
    naming its type and first line, password masked, never a traceback."""
    from langgraph_durable.cli import inspection

    def broken(*_: Any) -> Any:
        raise RuntimeError("boom at redis://:secret@example:6379\nsecond line")

    monkeypatch.setattr(inspection, "thread_overview", broken)
    with RedisSaver.from_conn_string(redis_url, key_prefix="lgd-first-hour-x") as saver:
        saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            empty_checkpoint(),
            {"step": 0},
            {},
        )
        try:
            env = {"REDIS_URL": redis_url, "LGD_DATA_DIR": str(tmp_path)}
            done = invoke("threads", "--key-prefix", "lgd-first-hour-x", env=env)
        finally:
            saver.delete_thread("t")
    assert done.exit_code == 1
    line = one_error_line(done.stderr)
    assert line.startswith("langgraph-durable: unexpected error: RuntimeError: boom at"), line
    assert "secret" not in line and "second line" not in line


def test_errors_of_the_installed_command_are_one_line_too(tmp_path: Path) -> None:
    """The console script, as a user runs it: a usage error of the group and of a command."""
    env = user_env(tmp_path)
    for args in (["--bogus"], ["show"]):
        done = run(args, env)
        assert done.returncode == 2
        assert one_error_line(done.stderr).startswith("langgraph-durable: bad input: ")


# -- 8: the demo's temporary folder goes, also when the demo fails ----------------------
def test_a_failed_demo_removes_its_temporary_folder_and_says_why(
    redis_url: str, key_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that fails (a negative tool latency, which only the API lets through:
    ``time.sleep`` refuses it in the first tool call) ends the demo with ``DemoFailed``
    naming the worker's last words; its folder is gone all the same."""
    from langgraph_durable.cli.demo import DemoFailed, run_demo

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    lines: list[str] = []
    with pytest.raises(DemoFailed, match="first worker exited with code 1 before the kill"):
        try:
            run_demo(redis_url, prefix=key_prefix, delay=-1.0, emit=lines.append)
        except DemoFailed as exc:
            assert "sleep length must be non-negative" in str(exc)
            raise
    assert lines and lines[0].startswith("Redis ")  # it had started
    assert leftover_demo_folders(tmp_path) == []
