"""``contextlab upload`` and the SessionEnd hook, over real HTTP against the real server."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from contextlab import upload_client
from contextlab.transcripts.models import Transcript
from tests.conftest import DEMO, FIXTURES, ROOT

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("clean_media"),
    pytest.mark.slow,
]

SHORT = DEMO / "marot__spotter__short.jsonl"
SUBAGENT = (
    FIXTURES / "marot__spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20_subagents_agent-a7be2f0.jsonl"
)


def session_folder(tmp_path: Path) -> Path:
    """A Claude Code project folder: ``<id>.jsonl`` and ``<id>/`` with subagents/ and
    tool-results/, plus things that are not the session's (a symlink, another folder)."""
    project = tmp_path / "project"
    (project / "s1" / "subagents").mkdir(parents=True)
    (project / "s1" / "tool-results").mkdir()
    (project / "s1" / "unrelated").mkdir()
    shutil.copy(SHORT, project / "s1.jsonl")
    shutil.copy(SUBAGENT, project / "s1" / "subagents" / "agent-a7be2f0.jsonl")
    (project / "s1" / "tool-results" / "toolu_01.txt").write_text("persisted output")
    (project / "s1" / "unrelated" / "notes.txt").write_text("not part of the session")
    secret = tmp_path / "outside-secret.txt"
    secret.write_text("must never be sent")
    (project / "s1" / "tool-results" / "link.txt").symlink_to(secret)
    return project


def test_a_session_file_takes_its_folder_along_and_nothing_else(tmp_path):
    project = session_folder(tmp_path)
    name, members = upload_client.session_members(project / "s1.jsonl")
    assert name == "s1.jsonl"
    assert [archived for _, archived in members] == [
        "s1.jsonl",
        "s1/subagents/agent-a7be2f0.jsonl",
        "s1/tool-results/toolu_01.txt",
    ]
    # the folder itself names the same session
    assert upload_client.session_members(project / "s1")[1] == members
    with upload_client.packed(project / "s1") as (packed_name, fh):
        assert packed_name == "s1.tar.gz"
        with tarfile.open(fileobj=io.BytesIO(fh.read()), mode="r:gz") as archive:
            names = archive.getnames()
    assert "s1/tool-results/link.txt" not in names
    assert all("unrelated" not in n for n in names)


def test_a_path_that_is_no_session_is_a_usage_error(tmp_path):
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "missing.jsonl", tmp_path / "empty"):
        with pytest.raises(upload_client.UploadError) as err:
            upload_client.session_members(path)
        assert err.value.exit_code == upload_client.EXIT_USAGE


def run_cli(
    *args: str, stdin: str = "", keep_stdin_open: bool = False, **extra_env: str
) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra_env}
    env.pop("CONTEXTLAB_URL", None)
    env.pop("CONTEXTLAB_TOKEN", None)
    command = [sys.executable, "-m", "contextlab.cli", *args]
    if not keep_stdin_open:
        done = subprocess.run(
            command, input=stdin, capture_output=True, text=True, env=env, timeout=120, check=False
        )
        return done.returncode, done.stdout, done.stderr
    # stdin written and left open, as Claude Code may leave it: the hook must finish on its own
    with subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
        proc.stdin.flush()
        try:
            code = proc.wait(timeout=120)
        finally:
            proc.kill()
        assert proc.stdout is not None
        assert proc.stderr is not None
        return code, proc.stdout.read(), proc.stderr.read()


def run_hook(url: str, token: str, **kwargs: Any) -> tuple[int, str, str]:
    """``contextlab hook session-end`` against ``url`` with ``token`` (``run_cli``'s options)."""
    return run_cli("hook", "session-end", "--url", url, "--token", token, **kwargs)


def test_upload_creates_the_session_and_a_second_upload_is_a_no_op(live_server, api_token, user):
    code, out, err = run_cli("upload", str(SHORT), "--url", live_server.url, "--token", api_token)
    assert code == 0, err
    transcript = Transcript.objects.get(owner=user)
    assert f"{live_server.url}/sessions/{transcript.pk}/" in out
    assert "uploaded" in out
    code, out, err = run_cli("upload", str(SHORT), "--url", live_server.url, "--token", api_token)
    assert code == 0, err
    assert "already there, unchanged" in out
    assert Transcript.objects.filter(owner=user).count() == 1


def test_a_session_folder_arrives_as_one_session_with_its_subagent(
    live_server, api_token, user, tmp_path
):
    project = session_folder(tmp_path)
    code, _, err = run_cli(
        "upload", str(project / "s1"), "--url", live_server.url, "--token", api_token
    )
    assert code == 0, err
    transcript = Transcript.objects.get(owner=user)
    kinds = [thread.get("kind") for thread in transcript.threads]
    assert "main" in kinds, transcript.threads
    assert "subagent" in kinds, transcript.threads


def test_a_wrong_token_is_refused_with_the_servers_reason(live_server):
    code, _, err = run_cli("upload", str(SHORT), "--url", live_server.url, "--token", "nope")
    assert code == upload_client.EXIT_REFUSED
    assert "HTTP 401" in err
    assert "Authentication required" in err
    assert Transcript.objects.count() == 0


def test_a_server_that_does_not_answer_says_so():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again when the block ends: nothing listens
    code, _, err = run_cli(
        "upload", str(SHORT), "--url", f"http://127.0.0.1:{port}", "--token", "t"
    )
    assert code == upload_client.EXIT_UNREACHABLE
    assert "no answer" in err


def test_missing_settings_are_named():
    code, _, err = run_cli("upload", str(SHORT))
    assert code == upload_client.EXIT_USAGE
    assert "CONTEXTLAB_URL" in err


def test_the_session_end_hook_uploads_the_transcript_even_with_stdin_left_open(
    live_server, api_token, user, tmp_path
):
    config = tmp_path / "claude"
    project = session_folder(config / "projects")
    payload = {
        "session_id": "s1",
        "transcript_path": str(project / "s1.jsonl"),
        "cwd": str(tmp_path),
        "hook_event_name": "SessionEnd",
        "reason": "prompt_input_exit",
    }
    code, _, err = run_hook(
        live_server.url,
        api_token,
        stdin=json.dumps(payload),
        keep_stdin_open=True,
        CLAUDE_CONFIG_DIR=str(config),
    )
    assert code == 0, err
    assert Transcript.objects.filter(owner=user).count() == 1


def test_the_hook_sends_only_a_transcript_under_claudes_projects_folder(tmp_path):
    config = tmp_path / "claude"
    project = session_folder(config / "projects")
    secret = tmp_path / "id_ed25519"
    secret.write_text("not a transcript")
    outside = session_folder(tmp_path / "elsewhere")
    (project / "link.jsonl").symlink_to(outside / "s1.jsonl")
    for path, message in [
        (secret, "only a session's .jsonl transcript"),
        (outside / "s1.jsonl", "only transcripts under"),
        (project / "link.jsonl", "only a session's .jsonl transcript"),
        (project / "s1", "only a session's .jsonl transcript"),
        (
            project / ".." / ".." / ".." / "elsewhere" / "project" / "s1.jsonl",
            "only transcripts under",
        ),
    ]:
        code, _, err = run_hook(
            "http://127.0.0.1:9",
            "t",
            stdin=json.dumps({"transcript_path": str(path)}),
            CLAUDE_CONFIG_DIR=str(config),
        )
        assert code == upload_client.EXIT_USAGE, (path, err)
        assert message in err, (path, err)


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("", "no hook input"),
        ("{not json", "not valid JSON"),
        ('["a list"]', "not a JSON object"),
        ('{"session_id": "x"}', "no transcript_path"),
    ],
)
def test_a_bad_hook_input_is_named(stdin, message):
    code, _, err = run_hook("http://x", "t", stdin=stdin)
    assert code == upload_client.EXIT_USAGE
    assert message in err


def test_the_engine_commands_still_run_through_the_same_command(tmp_path):
    code, out, err = run_cli("replay", "--json", str(SHORT))
    assert code == 0, err
    assert json.loads(out)["requests"]


def test_a_longer_version_of_the_session_updates_it(live_server, api_token, user, tmp_path):
    full = DEMO / "marot__spotter__tool_heavy.jsonl"
    start = tmp_path / "s.jsonl"
    start.write_bytes(b"".join(full.read_bytes().splitlines(keepends=True)[:12]))
    code, _, err = run_cli("upload", str(start), "--url", live_server.url, "--token", api_token)
    assert code == 0, err
    grown = tmp_path / "later" / "s.jsonl"  # the same file, later: Claude Code appended to it
    grown.parent.mkdir()
    grown.write_bytes(full.read_bytes())
    code, out, err = run_cli("upload", str(grown), "--url", live_server.url, "--token", api_token)
    assert code == 0, err
    assert "updated (the session grew" in out
    transcript = Transcript.objects.get(owner=user)
    assert transcript.size == full.stat().st_size


def test_codex_rollouts_upload_plain_gzipped_and_zstd(live_server, api_token, user, tmp_path):
    import zstandard

    rollout = ROOT / "tests" / "fixtures" / "codex" / "v0_64_remote_compaction.jsonl"
    day = tmp_path / "sessions" / "2025" / "10" / "01"
    day.mkdir(parents=True)
    plain = day / "rollout-2025-10-01T09-00-00-0199a000.jsonl"
    shutil.copy(rollout, plain)
    packed = tmp_path / "archived.jsonl.gz"
    packed.write_bytes(gzip.compress((rollout.parent / "v0_58_calls.jsonl").read_bytes()))
    # newer Codex re-encodes cold rollouts as .jsonl.zst
    cold = tmp_path / "rollout-2025-09-30T09-00-00-0199b000.jsonl.zst"
    cold.write_bytes(zstandard.ZstdCompressor().compress(rollout.read_bytes()))
    for path in (plain, packed, cold):
        code, _, err = run_cli("upload", str(path), "--url", live_server.url, "--token", api_token)
        assert code == 0, err
    rows = dict(Transcript.objects.filter(owner=user).values_list("name", "agent"))
    assert rows == {plain.name: "codex", packed.name: "codex", cold.name: "codex"}
    assert Transcript.objects.get(name=packed.name).version == "0.58.0"
    by_name = {t.name: t for t in Transcript.objects.filter(owner=user)}
    assert by_name[cold.name].request_count == by_name[plain.name].request_count > 0


def test_a_codex_sessions_folder_sends_each_rollout_as_a_session(
    live_server, api_token, user, tmp_path
):
    import zstandard

    fixtures = ROOT / "tests" / "fixtures" / "codex"
    sessions = tmp_path / "sessions"
    for day, name in (("01", "v0_58_calls.jsonl"), ("02", "v0_64_remote_compaction.jsonl")):
        folder = sessions / "2025" / "10" / day
        folder.mkdir(parents=True)
        shutil.copy(fixtures / name, folder / f"rollout-2025-10-{day}T09-00-00.jsonl")
    cold = sessions / "2025" / "09" / "30"
    cold.mkdir(parents=True)
    (cold / "rollout-2025-09-30T09-00-00.jsonl.zst").write_bytes(
        zstandard.ZstdCompressor().compress(
            (fixtures / "v0_104_two_remote_compactions.jsonl").read_bytes()
        )
    )
    (sessions / "notes.jsonl").write_text('{"kind": "not a rollout"}\n')
    code, out, err = run_cli(
        "upload", str(sessions), "--url", live_server.url, "--token", api_token
    )
    assert code == 0, err
    assert out.count("uploaded") == 3
    rows = Transcript.objects.filter(owner=user).order_by("name")
    assert [(t.name, t.agent, t.request_count) for t in rows] == [
        ("rollout-2025-09-30T09-00-00.jsonl.zst", "codex", 9),
        ("rollout-2025-10-01T09-00-00.jsonl", "codex", 4),
        ("rollout-2025-10-02T09-00-00.jsonl", "codex", 4),
    ]
    assert not upload_client.codex_rollouts(fixtures / "v0_58_calls.jsonl")  # a file: itself
    assert upload_client.is_codex_rollout(fixtures / "v0_2x_bare_items.jsonl")
    assert not upload_client.is_codex_rollout(SHORT)


CODEX_ROLLOUT = FIXTURES / "codex" / "v0_58_calls.jsonl"  # written for ContextLab


def test_the_hook_uploads_a_codex_rollout_from_codexs_sessions_folder(
    live_server, api_token, user, tmp_path
):
    day = tmp_path / "codex-home" / "sessions" / "2025" / "10" / "01"
    day.mkdir(parents=True)
    rollout = day / "rollout-2025-10-01T09-00-00-0199a0f0-0000-7000-8000-000000000002.jsonl"
    shutil.copyfile(CODEX_ROLLOUT, rollout)
    payload = {"session_id": "x", "transcript_path": str(rollout), "hook_event_name": "Stop"}
    code, _, err = run_hook(
        live_server.url,
        api_token,
        stdin=json.dumps(payload),
        CODEX_HOME=str(tmp_path / "codex-home"),
        CLAUDE_CONFIG_DIR=str(tmp_path / "claude"),
    )
    assert code == 0, err
    assert Transcript.objects.get(owner=user).agent == "codex"


def test_the_hook_sends_from_codexs_folder_only_a_codex_rollout(tmp_path):
    sessions = tmp_path / "codex-home" / "sessions"
    sessions.mkdir(parents=True)
    claude_session = sessions / "not-a-rollout.jsonl"
    shutil.copyfile(SHORT, claude_session)
    rollout = sessions / "rollout.jsonl"
    shutil.copyfile(CODEX_ROLLOUT, rollout)
    outside = tmp_path / "rollout.jsonl"
    shutil.copyfile(CODEX_ROLLOUT, outside)
    for path, message in [
        (claude_session, "not a Codex rollout"),
        (outside, "only transcripts under"),
        (rollout, "no answer"),  # accepted: it then finds no server at port 9
    ]:
        _, _, err = run_hook(
            "http://127.0.0.1:9",
            "t",
            stdin=json.dumps({"transcript_path": str(path)}),
            CODEX_HOME=str(tmp_path / "codex-home"),
            CLAUDE_CONFIG_DIR=str(tmp_path / "claude"),
        )
        assert message in err, (path, err)
