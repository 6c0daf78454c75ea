"""The `langgraph-durable` console script: the demo to its verdict, then every command on
the thread it left behind (as a user would run them, in subprocesses)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langgraph_durable import RedisSaver
from tests.helpers.redis_keys import delete_prefix, flip_last_bit

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "langgraph_durable.cli"]


def run(args: list[str], env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [*CLI, *args], check=False, env=env, cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def demo(redis_url: str) -> Iterator[tuple[dict[str, str], dict[str, Any]]]:
    prefix = f"lgdcli{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "REDIS_URL": redis_url}
    # The kill waits on events (the charge recorded, the e-mail hanging): any delay holds.
    done = run(["demo", "--damage", "--delay", "0.3", "--json", "--key-prefix", prefix], env)
    verdict = json.loads(done.stdout)
    yield {**env, "LGD_PREFIX": prefix}, verdict
    import redis

    client = redis.Redis.from_url(redis_url)
    delete_prefix(client, prefix)
    client.close()


def test_demo_repeats_no_side_effect_and_shows_the_fallback(demo: Any, redis_url: str) -> None:
    env, verdict = demo
    import redis

    client = redis.Redis.from_url(redis_url)
    tk = RedisSaver(client, key_prefix=env["LGD_PREFIX"]).keys.thread(verdict["thread_id"])
    assert 0 < client.ttl(tk.cp) <= 24 * 3600, "the demo's data expires"
    client.close()
    assert verdict["exactly_once"] is True
    assert verdict["side_effects"] == verdict["planned"] == 4 and verdict["duplicates"] == []
    assert verdict["replayed"] == ["charge_card"]  # recorded before the kill
    # --damage: the read fell back a step, but the step the kill hit is still the tools'
    steps = {n: nodes for n, nodes in verdict["steps"]}
    assert verdict["resumed_from_step"] < verdict["interrupted_step"] - 1
    assert steps[verdict["interrupted_step"]] == ["tools"]
    assert verdict["escalations"] == [{"call": "send_email", "answer": "retry"}]
    assert [s["reason"] for s in verdict["skipped_checkpoints"]] == ["checksum mismatch"]
    assert verdict["skipped_checkpoints"][0]["checkpoint_id"] == verdict["damaged_checkpoint"]


def test_every_command_works_on_the_demo_thread(demo: Any) -> None:
    env, verdict = demo
    prefix = ["--key-prefix", env["LGD_PREFIX"]]
    thread = verdict["thread_id"]
    threads = json.loads(run(["threads", "--json", *prefix], env).stdout)
    assert [t["thread_id"] for t in threads] == [thread]
    assert threads[0]["ledger_entries"] == 4

    history = json.loads(run(["history", thread, "--json", *prefix], env).stdout)
    assert [h["step"] for h in history] == sorted((h["step"] for h in history), reverse=True)
    assert history[0]["step"] == threads[0]["step"]

    shown = json.loads(run(["show", thread, "--json", *prefix], env).stdout)
    assert shown["values"]["messages"][-1] == "ai: Report written, team and boss informed."
    older = history[-2]["checkpoint_id"]
    assert json.loads(run(["show", thread, older, "--json", *prefix], env).stdout)["step"] == 0

    entries = json.loads(run(["ledger", thread, "--json", *prefix], env).stdout)
    assert [(e["tool"], e["state"]) for e in entries] == [
        ("charge_card", "result"),
        ("send_email", "result"),
        ("write_report", "result"),
        ("send_email", "result"),
    ]
    assert entries[1]["resolution"] == "retry" and entries[1]["attempts"] == 2

    text = run(["ledger", thread, *prefix], env).stdout
    assert "IDEMPOTENCY KEY" in text and "charge_card" in text

    # The demo's damage was quarantined when the worker resumed: no finding, yet not ok.
    done = run(["verify", "--all", "--json", *prefix], env, check=False)
    verified = json.loads(done.stdout)
    assert verified[0]["findings"] == [] and verified[0]["quarantined"] == 1
    assert not verified[0]["ok"] and done.returncode == 1


def test_verify_exits_non_zero_on_damage(redis_url: str, demo: Any) -> None:
    import redis

    env, verdict = demo
    prefix = env["LGD_PREFIX"]
    client = redis.Redis.from_url(redis_url)
    tk_cp = f"{prefix}:{{{verdict['thread_id']}}}:cp"
    field = min(client.hkeys(tk_cp))
    record = client.hget(tk_cp, field)
    flip_last_bit(client, tk_cp, field)
    try:
        done = run(["verify", verdict["thread_id"], "--key-prefix", prefix], env, check=False)
        assert done.returncode == 1
        assert "DAMAGED" in done.stdout and "checksum mismatch" in done.stdout
    finally:
        client.hset(tk_cp, field, record)
        client.close()


def test_server_start_status_stop(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    data = ["--data-dir", str(tmp_path)]
    assert run(["server", "status", *data], env, check=False).returncode == 3
    url = run(["server", "start", *data], env).stdout.strip()
    try:
        assert url.startswith("redis://127.0.0.1:")
        status = json.loads(run(["server", "status", "--json", *data], env).stdout)
        assert status == {"running": True, "url": url, "data_dir": str(tmp_path)}
        assert run(["server", "start", *data], env).stdout.strip() == url  # reused
    finally:
        assert run(["server", "stop", *data], env).stdout.strip() == "stopped"
    assert "not running" in run(["server", "status", *data], env, check=False).stdout


def test_server_start_on_a_port_and_one_data_dir_per_user(tmp_path: Path) -> None:
    """``--port`` picks the port; the default data directory is the user's, whatever the
    working directory (LGD_DATA_DIR, else XDG_DATA_HOME), so every tool finds one server."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "LGD_DATA_DIR")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = run(["server", "start", "--port", str(port)], env).stdout.strip()
    try:
        assert url == f"redis://127.0.0.1:{port}/0"
        status = json.loads(run(["server", "status", "--json"], env).stdout)
        assert status["data_dir"] == str(tmp_path / "xdg" / "langgraph-durable")
        other = run(["server", "start", "--port", str(port + 1)], env, check=False)
        assert other.returncode == 2 and f"already runs on port {port}" in other.stderr
        assert len(other.stderr.strip().splitlines()) == 1  # one line, no traceback
    finally:
        assert run(["server", "stop"], env).stdout.strip() == "stopped"
    explicit = {**env, "LGD_DATA_DIR": str(tmp_path / "mine")}
    status = json.loads(run(["server", "status", "--json"], explicit, check=False).stdout)
    assert status["data_dir"] == str(tmp_path / "mine")


# -- safe to point at production ------------------------------------------------------
# In-process (click's CliRunner) where only the command's effect on Redis matters; the
# installed console script in a subprocess where the process's output and exit code do.
BIN = str(Path(sys.executable).parent / "langgraph-durable")
NEW_KEY, OLD_KEY = "new-signing-key-0123456789", "old-signing-key-0123456789"


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Any:
    from click.testing import CliRunner

    from langgraph_durable.cli import cli

    return CliRunner().invoke(
        cli, list(args), env={"LGD_SIGNING_KEY": None, **(env or {})}, catch_exceptions=False
    )


def dump_prefix(client: Any, prefix: str) -> dict[bytes, tuple[Any, ...]]:
    """Every key under ``prefix``: its type, its whole content and its TTL. Not DUMP's
    bytes: a plain HGET of a big hash steps Redis's incremental rehashing, which reorders
    what DUMP returns although nothing changed."""
    read = {
        b"hash": client.hgetall,
        b"zset": lambda k: client.zrange(k, 0, -1, withscores=True),
        b"string": client.get,
    }
    snapshot = {}
    for key in client.scan_iter(match=f"{prefix}:*"):
        kind = client.type(key)
        snapshot[key] = (kind, read.get(kind, client.dump)(key), client.pttl(key))
    return snapshot


@pytest.fixture
def damaged(redis_url: str, key_prefix: str, redis_client: Any) -> dict[str, Any]:
    """A thread of a real graph with its newest checkpoint and a pending write of the one
    before damaged (one bit flipped each)."""
    from langgraph_durable import RedisSaver
    from tests.helpers import graphs

    config = {"configurable": {"thread_id": "hurt"}}
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        graphs.react_graph(rounds=3).compile(checkpointer=saver).invoke(
            graphs.react_input(), config
        )
        newest, previous = list(saver.list(config, limit=2))
        tk = saver.keys.thread("hurt")
        newest_member = saver.keys.checkpoint_member("", newest.checkpoint["id"])
        flip_last_bit(redis_client, tk.cp, newest_member)
        of_previous = saver.keys.checkpoint_member("", previous.checkpoint["id"]).encode()
        write = min(f for f in redis_client.hkeys(tk.wr) if f.startswith(of_previous + b"\0"))
        flip_last_bit(redis_client, tk.wr, write)
    return {
        "prefix": key_prefix,
        "url": redis_url,
        "newest": newest.checkpoint["id"],
        "previous": previous.checkpoint["id"],
        "checkpoint_member": newest_member,
        "write_member": write.decode(),
    }


def test_inspection_changes_nothing_in_redis(damaged: dict[str, Any], redis_client: Any) -> None:
    where = ["--redis-url", damaged["url"], "--key-prefix", damaged["prefix"]]
    before = dump_prefix(redis_client, damaged["prefix"])
    shown = invoke("show", "hurt", *where)
    assert shown.exit_code == 0, shown.output
    assert f"skipped damaged checkpoint {damaged['newest']}: checksum mismatch" in shown.stdout
    assert invoke("show", "hurt", "--json", *where).exit_code == 0
    assert invoke("history", "hurt", *where).exit_code == 0
    assert invoke("threads", *where).exit_code == 0
    assert invoke("ledger", "hurt", *where).exit_code == 0
    assert invoke("verify", "hurt", *where).exit_code == 1
    assert dump_prefix(redis_client, damaged["prefix"]) == before, "a read wrote to Redis"
    verified = invoke("verify", "hurt", *where)  # the damage is still there to be found
    assert verified.exit_code == 1 and "DAMAGED" in verified.stdout
    assert "checksum mismatch" in verified.stdout


def test_show_of_a_damaged_checkpoint_is_a_message_not_a_traceback(
    damaged: dict[str, Any],
) -> None:
    done = subprocess.run(
        [BIN, "show", "hurt", damaged["newest"], "--key-prefix", damaged["prefix"]],
        env={**os.environ, "REDIS_URL": damaged["url"]},
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"checkpoint {damaged['newest']} of thread 'hurt' is damaged" in done.stderr


def test_verify_repair_quarantines_the_damage_and_a_quarantined_thread_is_not_ok(
    damaged: dict[str, Any], redis_client: Any
) -> None:
    where = ["--redis-url", damaged["url"], "--key-prefix", damaged["prefix"]]
    repaired = invoke("verify", "hurt", "--repair", "--json", *where)
    assert repaired.exit_code == 1, repaired.output
    (report,) = json.loads(repaired.stdout)
    moved = {(kind, field) for kind, field, _ in report["moved"]}
    assert ("cp", damaged["checkpoint_member"]) in moved
    assert ("wr", damaged["write_member"]) in moved
    task = damaged["write_member"].split("\0")[:4]  # its task's other writes go with it
    assert all(f.split("\0")[:4] == task for kind, f in moved if kind == "wr")
    assert report["findings"] == [] and report["quarantined"] == len(moved)
    assert report["ok"] is False

    again = invoke("verify", "hurt", *where)  # read-only again: nothing left to move
    assert again.exit_code == 1
    assert "NOT OK (" in again.stdout and f"{len(moved)} records quarantined" in again.stdout
    shown = json.loads(invoke("show", "hurt", "--json", *where).stdout)
    assert shown["checkpoint_id"] == damaged["previous"] and shown["skipped_damaged"] == []
    tk_qt = f"{damaged['prefix']}:{{hurt}}:qt"
    assert redis_client.hlen(tk_qt) == len(moved)


def test_a_quarantined_record_makes_verify_not_ok(
    saver: Any, damaged: dict[str, Any], redis_client: Any
) -> None:
    """An application's read quarantines the damage (repair_on_read, the default); the
    thread then verifies without findings, but is not ok: its records are gone."""
    saver.get_tuple({"configurable": {"thread_id": "hurt"}})
    report = saver.verify("hurt")
    assert report.findings == [] and report.quarantined >= 2 and not report.ok
    where = ["--redis-url", damaged["url"], "--key-prefix", damaged["prefix"]]
    done = invoke("verify", "hurt", *where)
    assert done.exit_code == 1
    assert f"{report.quarantined} records quarantined" in done.stdout


def test_a_saver_with_repair_on_read_off_reads_past_damage_without_writing(
    damaged: dict[str, Any], redis_client: Any
) -> None:
    from langgraph_durable import RedisSaver

    before = dump_prefix(redis_client, damaged["prefix"])
    with RedisSaver.from_conn_string(
        damaged["url"], key_prefix=damaged["prefix"], repair_on_read=False
    ) as reader:
        latest = reader.get_tuple({"configurable": {"thread_id": "hurt"}})
        assert latest.checkpoint["id"] == damaged["previous"]
        assert len(list(reader.list({"configurable": {"thread_id": "hurt"}}))) > 1
    assert dump_prefix(redis_client, damaged["prefix"]) == before


def test_verify_of_a_thread_that_does_not_exist_says_so(redis_url: str, key_prefix: str) -> None:
    where = ["--redis-url", redis_url, "--key-prefix", key_prefix]
    done = invoke("verify", "nobody", *where)
    assert done.exit_code == 1
    assert done.stdout.strip() == f"nobody: no such thread (key prefix {key_prefix!r})"
    (row,) = json.loads(invoke("verify", "nobody", "--json", *where).stdout)
    assert row == {"thread_id": "nobody", "exists": False, "ok": False}
    nothing = invoke("verify", "--all", *where)
    assert nothing.exit_code == 1 and "no threads under key prefix" in nothing.output


@pytest.mark.parametrize("command", ["history", "ledger"])
def test_history_and_ledger_of_a_thread_that_does_not_exist_say_so(
    redis_url: str, key_prefix: str, command: str
) -> None:
    done = invoke(command, "nobody", "--redis-url", redis_url, "--key-prefix", key_prefix)
    assert done.exit_code == 1
    assert f"no such thread 'nobody' (key prefix {key_prefix!r})" in done.output


@pytest.mark.parametrize("command", ["show", "history", "ledger", "verify"])
def test_a_thread_argument_that_is_not_utf8_is_one_line_not_a_traceback(
    redis_url: str, key_prefix: str, command: str
) -> None:
    done = subprocess.run(
        [BIN.encode(), command.encode(), b"\xff\xfe", b"--key-prefix", key_prefix.encode()],
        env={**os.environ, "REDIS_URL": redis_url},
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("langgraph-durable")]
    assert "bad input: thread_id must be valid Unicode" in line


@pytest.fixture
def signed(redis_url: str, key_prefix: str) -> dict[str, Any]:
    """A thread written under OLD_KEY, then more of it after rotating to [NEW_KEY, OLD_KEY]."""
    from langgraph_durable import RedisSaver
    from tests.helpers import graphs

    config = {"configurable": {"thread_id": "signed"}}
    for keys in ([OLD_KEY], [NEW_KEY, OLD_KEY]):
        with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, signing_key=keys) as s:
            graphs.react_graph(rounds=1).compile(checkpointer=s).invoke(
                graphs.react_input(), config
            )
    return {"where": ["--redis-url", redis_url, "--key-prefix", key_prefix]}


def test_signing_keys_from_flags_environment_or_file(
    signed: dict[str, Any], tmp_path: Path
) -> None:
    where = signed["where"]
    unsigned = invoke("verify", "signed", *where)
    assert unsigned.exit_code == 1 and "bad signature" in unsigned.stdout

    flags = invoke("verify", "signed", "--signing-key", NEW_KEY, "--signing-key", OLD_KEY, *where)
    assert flags.exit_code == 0, flags.output
    env = invoke("verify", "signed", *where, env={"LGD_SIGNING_KEY": f"{NEW_KEY}, {OLD_KEY}"})
    assert env.exit_code == 0, env.output
    key_file = tmp_path / "keys"
    key_file.write_text(f"{NEW_KEY}\n{OLD_KEY}\n")
    from_file = invoke("verify", "signed", "--signing-key-file", str(key_file), *where)
    assert from_file.exit_code == 0, from_file.output
    shown = invoke("show", "signed", "--json", "--signing-key-file", str(key_file), *where)
    assert json.loads(shown.stdout)["values"]["messages"][-1] == "ai: final answer"

    key_file.write_text(f"{NEW_KEY}\n")  # the old key dropped too early: its records fail
    assert invoke("verify", "signed", "--signing-key-file", str(key_file), *where).exit_code == 1
    for result in (unsigned, flags, env, from_file, shown):
        assert NEW_KEY not in result.output and OLD_KEY not in result.output


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["--signing-key-file", "/nonexistent/keys"], {}, "cannot read /nonexistent/keys"),
        (["--signing-key-file", "{short}"], {}, "key 2 from --signing-key-file"),
        (["--signing-key", "tooshort-secret"], {}, "key 1 from --signing-key is 15 bytes"),
        ([], {"LGD_SIGNING_KEY": f"{NEW_KEY},tooshort-secret"}, "key 2 from LGD_SIGNING_KEY"),
        (["--signing-key", NEW_KEY, "--signing-key-file", "{short}"], {}, "not both"),
    ],
)
def test_bad_signing_keys_are_named_never_shown(
    signed: dict[str, Any], tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    short = tmp_path / "keys"
    short.write_text(f"{NEW_KEY}\ntooshort-secret\n")
    args = [a.replace("{short}", str(short)) for a in args]
    done = invoke("verify", "signed", *args, *signed["where"], env=env)
    assert done.exit_code == 2 and message in done.output
    assert "tooshort-secret" not in done.output.replace("--signing-key", "")
    assert NEW_KEY not in done.output.replace(f"--signing-key {NEW_KEY}", "")


@pytest.fixture(scope="module")
def password_server() -> Iterator[tuple[int, str]]:
    """A private redis-server that requires a password."""
    import shutil
    import tempfile

    from tests.helpers.servers import start_server

    password = f"pw-{uuid.uuid4().hex}"
    workdir = tempfile.mkdtemp(prefix="lgd-auth-")
    server = start_server(workdir, password=password)
    yield server.port, password
    server.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def run_bin(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BIN, *args], check=False, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def assert_one_line_exit_2(done: subprocess.CompletedProcess, *secrets: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("langgraph-durable: "), done.stderr
    for secret in secrets:
        assert secret not in done.stdout + done.stderr


@pytest.mark.parametrize(
    "case", ["wrong port", "wrong password", "no password", "bad scheme", "bad port", "TLS"]
)
def test_connection_errors_are_one_line_and_exit_2(
    password_server: tuple[int, str], case: str
) -> None:
    from tests.helpers.servers import free_port

    port, password = password_server
    wrong = f"not-{password}"
    url = {
        "wrong port": f"redis://:{password}@127.0.0.1:{free_port()}/0",
        "wrong password": f"redis://:{wrong}@127.0.0.1:{port}/0",
        "no password": f"redis://127.0.0.1:{port}/0",
        "bad scheme": f"http://:{password}@127.0.0.1:{port}/0",
        "bad port": f"redis://:{password}@127.0.0.1:port/0",
        "TLS": f"rediss://:{password}@127.0.0.1:{port}/0",  # a plain server: no handshake
    }[case]
    done = run_bin(["threads", "--redis-url", url], {**os.environ, "REDIS_URL": ""})
    assert_one_line_exit_2(done, password, wrong)
    if case == "wrong password":
        assert "authentication failed" in done.stderr
        assert f"redis://:***@127.0.0.1:{port}/0" in done.stderr


@pytest.mark.parametrize(
    "command",
    [["show", "t"], ["history", "t"], ["ledger", "t"], ["verify", "--all"], ["demo"]],
)
def test_every_command_answers_an_auth_error_in_one_line(
    password_server: tuple[int, str], command: list[str]
) -> None:
    port, password = password_server
    wrong = f"not-{password}"
    done = run_bin(command, {**os.environ, "REDIS_URL": f"redis://:{wrong}@127.0.0.1:{port}/0"})
    assert_one_line_exit_2(done, password, wrong)


def test_the_demo_never_shows_or_passes_the_password(password_server: tuple[int, str]) -> None:
    from langgraph_durable.cli.demo import worker_command, worker_env

    port, password = password_server
    url = f"redis://:{password}@127.0.0.1:{port}/0"
    done = run_bin(
        ["demo", "--delay", "0.2", "--key-prefix", f"lgdpw{uuid.uuid4().hex[:8]}"],
        {**os.environ, "REDIS_URL": url},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "VERDICT: OK" in done.stdout
    assert f"redis://:***@127.0.0.1:{port}/0" in done.stdout
    assert password not in done.stdout + done.stderr
    # The workers' command lines (readable by every user) carry neither URL nor keys.
    argv = worker_command("lgd", "thread", Path("/tmp/x"), 0.2)
    env = worker_env(url, [NEW_KEY.encode()])
    assert not any(password in a or "redis" in a or NEW_KEY in a for a in argv)
    assert (
        env["REDIS_URL"] == url and bytes.fromhex(env["LGD_DEMO_SIGNING_KEYS"]) == NEW_KEY.encode()
    )


def test_a_refused_record_is_reported_as_damage_and_runs_nothing(
    saver: Any, redis_url: str, key_prefix: str, redis_client: Any, tmp_path: Path
) -> None:
    """A checksum-valid record naming os.system: every command names the refusal, none
    calls it, none writes, and the installed command shows no traceback."""
    from tests.integration.test_trust import (
        code_running_payload,
        counting_graph,
        forge_newest_value,
    )

    marker = tmp_path / "pwned"
    counting_graph().compile(checkpointer=saver).invoke(
        {"count": 0, "note": ""}, {"configurable": {"thread_id": "forged"}}
    )
    forged = forge_newest_value(saver, redis_client, "forged", code_running_payload(marker))
    where = ["--redis-url", redis_url, "--key-prefix", key_prefix]
    before = dump_prefix(redis_client, key_prefix)

    latest = invoke("show", "forged", *where)
    assert latest.exit_code == 0 and f"skipped damaged checkpoint {forged}" in latest.stdout
    explicit = run_bin(["show", "forged", forged, *where], {**os.environ})
    assert explicit.returncode == 1 and "Traceback" not in explicit.stderr
    assert "refused type os.system" in explicit.stderr
    verified = invoke("verify", "forged", *where)
    assert verified.exit_code == 1 and "refused type os.system" in verified.stdout
    assert invoke("history", "forged", *where).exit_code == 0
    repaired = invoke("verify", "forged", "--repair", *where)  # may be configuration: kept
    assert repaired.exit_code == 1 and "left in place" in repaired.stdout, repaired.output
    assert dump_prefix(redis_client, key_prefix) == before
    assert not marker.exists()


def test_resign_completes_a_key_rotation_from_the_command_line(signed: dict[str, Any]) -> None:
    where = signed["where"]
    assert invoke("verify", "signed", "--signing-key", NEW_KEY, *where).exit_code == 1
    assert invoke("resign", "signed", *where).exit_code == 2  # no key to sign with
    done = invoke("resign", "signed", *where, env={"LGD_SIGNING_KEY": f"{NEW_KEY},{OLD_KEY}"})
    assert done.exit_code == 0 and "records re-signed" in done.stdout, done.output
    assert invoke("verify", "signed", "--signing-key", NEW_KEY, *where).exit_code == 0


def test_a_password_in_the_url_query_is_masked_too() -> None:
    from langgraph_durable.core.redact import redact, redact_url

    url = "redis://127.0.0.1:6419/0?password=hunter2secret&db=0"
    assert "hunter2secret" not in redact_url(url)
    assert "hunter2secret" not in redact(f"cannot reach {url}: hunter2secret refused", url)


def test_version_prints_the_installed_version() -> None:
    """The console script, as installed: the distribution's version, which the package
    also reports as ``__version__``."""
    from importlib.metadata import version

    import langgraph_durable

    done = subprocess.run(
        [BIN, "--version"], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"langgraph-durable, version {version('langgraph-durable')}"
    assert version("langgraph-durable") == langgraph_durable.__version__


def test_an_incident_is_closed_by_acknowledging_the_quarantine_and_reopened_by_new_damage(
    redis_url: str, key_prefix: str
) -> None:
    """``verify`` stays red while the quarantine holds anything; ``acknowledge`` records who
    looked and why (shown by ``ledger``), empties it, and ``verify`` is OK again, also
    ``--all``; the next damage is quarantined and reported anew."""
    import redis

    from tests.helpers.graphs import counter_graph

    env = {**os.environ, "REDIS_URL": redis_url}
    opts = ["--key-prefix", key_prefix]
    client = redis.Redis.from_url(redis_url)
    saver = RedisSaver(client, key_prefix=key_prefix)
    graph = counter_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "incident"}}
    graph.invoke({"value": 1, "trail": []}, config)
    tk = saver.keys.thread("incident")

    def damage() -> None:
        flip_last_bit(client, tk.cp, max(client.hkeys(tk.cp)))
        saver.get_tuple(config)  # a read moves it to the quarantine (and falls back)

    try:
        damage()
        assert client.hlen(tk.qt) == 1
        assert run(["verify", "incident", *opts], env, check=False).returncode == 1
        done = run(
            [
                "acknowledge",
                "incident",
                "--reason",
                "re-ran step 2",
                "--by",
                "ann",
                "--json",
                *opts,
            ],
            env,
        )
        acked = json.loads(done.stdout)
        assert (acked["by"], acked["reason"], len(acked["records"])) == ("ann", "re-ran step 2", 1)
        assert acked["records"][0]["kind"] == "cp" and "checksum" in acked["records"][0]["damage"]
        assert client.hlen(tk.qt) == 0
        assert run(["verify", "incident", *opts], env).returncode == 0
        assert run(["verify", "--all", *opts], env).returncode == 0
        rows = json.loads(run(["ledger", "incident", "--json", *opts], env).stdout)
        (row,) = [r for r in rows if r["tool"] == "quarantine"]
        assert row["decisions"][0]["by"] == "ann" and row["state"] == "acknowledged"
        again = run(["acknowledge", "incident", "--reason", "x", *opts], env, check=False)
        assert again.returncode == 2 and "nothing of thread" in again.stderr
        graph.invoke({"value": 2, "trail": []}, config)  # the thread goes on; new damage
        damage()
        assert run(["verify", "incident", *opts], env, check=False).returncode == 1
    finally:
        client.close()
