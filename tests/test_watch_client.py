"""``contextlab watch`` over real HTTP against the live server, with a real worker: a session
file that grows reaches the server as appended bytes, the replay follows, a restarted watch
goes on where it stopped, and a file rewritten shorter is a new upload."""

from __future__ import annotations

import io
import json

import pytest

from contextlab import engine, upload_client, watch_client
from contextlab.runs.models import Run, RunResult
from contextlab.transcripts.models import Transcript
from tests.conftest import DEMO, FIXTURES, settle_runs, wait_for_run

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
]

FULL = DEMO / "marot__spotter__tool_heavy.jsonl"  # 4 requests; its first 12 lines hold 2
LINES = FULL.read_bytes().splitlines(keepends=True)


def watcher(live_server, api_token, root, state) -> watch_client.Watcher:
    return watch_client.Watcher(
        [root], url=live_server.url, token=api_token, state_path=state, out=io.StringIO()
    )


def requests_replayed(transcript: Transcript) -> int:
    run = wait_for_run(transcript.runs.get().pk)
    assert run.status == Run.Status.DONE, run.error
    return len(RunResult.objects.get(run=run).read()["requests"])


def test_watch_creates_then_appends_and_survives_a_restart(
    live_server, api_token, user, celery_worker_process, tmp_path
):
    root = tmp_path / "projects" / "-home-ann-spotter"
    root.mkdir(parents=True)
    (root / "s1" / "subagents").mkdir(parents=True)
    (root / "s1" / "subagents" / "agent-1.jsonl").write_bytes(LINES[0])  # not a session
    session = root / "s1.jsonl"
    state = tmp_path / "watch.json"
    # a partial line at the end is not sent with the first upload
    session.write_bytes(b"".join(LINES[:12]) + LINES[12][:30])
    watch = watcher(live_server, api_token, root.parent, state)
    assert watch.scan() == 1
    transcript = Transcript.objects.get(owner=user)
    assert transcript.size == len(b"".join(LINES[:12]))
    assert requests_replayed(transcript) == 2
    saved = json.loads(state.read_text())[str(session.resolve())]
    assert saved["session"] == transcript.pk
    assert saved["offset"] == transcript.size

    # Claude Code writes on; a new watch (restarted) sends only what the file gained
    session.write_bytes(FULL.read_bytes())
    watch = watcher(live_server, api_token, root.parent, state)
    assert watch.scan() == 1
    assert watch.scan() == 0  # nothing new
    transcript.refresh_from_db()
    assert Transcript.objects.filter(owner=user).count() == 1
    assert transcript.size == len(FULL.read_bytes())
    assert transcript.is_live
    assert requests_replayed(transcript) == 4

    # the state file lost (or another machine sent it): the 409 tells where the server is
    state.unlink()
    watch = watcher(live_server, api_token, root.parent, state)
    watch.state[str(session.resolve())] = watch_client.Sent(
        transcript.pk, 10, session.stat().st_ino, watch_client._head(session, 10)
    )
    with session.open("ab") as fh:
        fh.write(LINES[1])  # one more line
    assert watch.scan() == 1
    transcript.refresh_from_db()
    assert transcript.size == len(FULL.read_bytes()) + len(LINES[1])
    settle_runs()


def test_a_file_rewritten_shorter_is_a_new_upload(
    live_server, api_token, user, celery_worker_process, tmp_path
):
    root = tmp_path / "projects"
    root.mkdir()
    session = root / "s2.jsonl"
    session.write_bytes(FULL.read_bytes())
    state = tmp_path / "watch.json"
    watch = watcher(live_server, api_token, root, state)
    watch.scan()
    session.write_bytes(b"".join(LINES[:12]))
    watch.scan()
    sessions = Transcript.objects.filter(owner=user).order_by("pk")
    assert [t.size for t in sessions] == [len(FULL.read_bytes()), len(b"".join(LINES[:12]))]
    settle_runs()


def test_the_watch_command_names_missing_settings(tmp_path, capsys):
    assert watch_client.main([str(tmp_path), "--once", "--url", "", "--token", ""]) == 64
    assert "CONTEXTLAB_URL" in capsys.readouterr().err


def test_the_watch_command_sends_a_session_once_and_remembers_it(
    live_server, api_token, user, celery_worker_process, tmp_path
):
    from tests.test_upload_client import run_cli

    root = tmp_path / "projects"
    root.mkdir()
    (root / "s3.jsonl").write_bytes(b"".join(LINES[:12]))
    state = tmp_path / "state.json"
    args = ("watch", str(root), "--once", "--state", str(state))
    code, out, err = run_cli(*args, "--url", live_server.url, "--token", api_token)
    assert code == 0, err
    transcript = Transcript.objects.get(owner=user)
    assert f"/sessions/{transcript.pk}/" in out
    code, out, err = run_cli(*args, "--url", live_server.url, "--token", api_token)
    assert code == 0, err
    assert out == ""  # nothing new: nothing sent
    assert Transcript.objects.filter(owner=user).count() == 1
    settle_runs()


def test_a_corrupt_state_file_is_forgotten_not_fatal(tmp_path):
    state = tmp_path / "watch.json"
    for content in ("{not json", "[1, 2]", '{"x": {"session": "a"}}', '{"y": 5}'):
        state.write_text(content)
        assert watch_client.load_state(state) == {}


CODEX = FIXTURES / "codex" / "v0_58_calls.jsonl"  # a rollout of 4 calls, written for ContextLab


def test_watch_follows_a_codex_rollout_told_by_its_content(
    live_server, api_token, user, celery_worker_process, tmp_path
):
    """A rollout under Codex's sessions folder (``YYYY/MM/DD/``) is created, then appended to,
    as a Claude Code session is; the server tells it is Codex's from its content."""
    rollout_lines = CODEX.read_bytes().splitlines(keepends=True)
    day = tmp_path / ".codex" / "sessions" / "2025" / "11" / "17"
    day.mkdir(parents=True)
    rollout = day / "rollout-2025-11-17T15-30-28-0199a0f0-0000-7000-8000-000000000001.jsonl"
    rollout.write_bytes(b"".join(rollout_lines[:8]))
    calls_before = len([m for m in engine.load_session(rollout).main.messages if m.usage])
    state = tmp_path / "watch.json"
    watch = watcher(live_server, api_token, tmp_path / ".codex" / "sessions", state)
    assert watch.scan() == 1
    transcript = Transcript.objects.get(owner=user)
    assert transcript.agent == "codex"
    assert requests_replayed(transcript) == calls_before < 4
    rollout.write_bytes(CODEX.read_bytes())
    assert watch.scan() == 1
    transcript.refresh_from_db()
    assert Transcript.objects.filter(owner=user).count() == 1
    assert transcript.size == len(CODEX.read_bytes())
    assert transcript.agent == "codex"
    assert requests_replayed(transcript) == 4
    settle_runs()


def test_the_default_folders_are_claudes_and_codexs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    (tmp_path / "codex-home" / "sessions").mkdir(parents=True)
    roots = [r for r in upload_client.codex_session_roots() if r.is_dir()]
    assert roots == [(tmp_path / "codex-home" / "sessions").resolve()]
    code = watch_client.main(["--url", "", "--token", "t", "--once"])
    assert code == upload_client.EXIT_USAGE
    assert "no server" in capsys.readouterr().err  # past "no folder to watch": it found one
    (tmp_path / "codex-home" / "sessions").rmdir()
    assert watch_client.main(["--url", "", "--token", "t", "--once"]) == upload_client.EXIT_USAGE
    assert "no folder to watch" in capsys.readouterr().err
