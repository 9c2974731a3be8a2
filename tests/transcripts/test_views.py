from __future__ import annotations

import re
from html import unescape as html_unescape

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from contextlab import engine
from contextlab.jobs import replay as runner
from contextlab.runs import services as run_services
from contextlab.runs.templatetags.humanize_tokens import tokens
from contextlab.transcripts.models import Transcript

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]

JSON = {"HTTP_ACCEPT": "application/json"}


def test_anonymous_is_sent_to_login(client):
    response = client.get("/sessions/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert client.post("/sessions/upload/").status_code == 302
    assert client.post("/sessions/1/delete/").status_code == 302


def test_empty_state_explains_what_to_do(alice_client):
    response = alice_client.get("/sessions/")
    assert b"No sessions yet" in response.content
    assert b'id="upload-form"' in response.content
    assert b'data-max-bytes="5368709120"' in response.content


def test_list_shows_only_own_sessions(
    alice_client, make_transcript, other_user, short_jsonl, tool_heavy_jsonl
):
    make_transcript(short_jsonl)
    make_transcript(tool_heavy_jsonl, owner=other_user, name="secret-of-mallory.jsonl")
    content = alice_client.get("/sessions/").content
    assert b"marot__spotter__short.jsonl" in content
    assert b"secret-of-mallory" not in content


def test_xhr_upload_of_several_files_answers_json(alice_client, short_jsonl, tool_heavy_jsonl):
    response = alice_client.post(
        "/sessions/upload/",
        {
            "file": [
                SimpleUploadedFile("a.jsonl", short_jsonl.read_bytes()),
                SimpleUploadedFile("b.jsonl", tool_heavy_jsonl.read_bytes()),
            ]
        },
        **JSON,
    )
    assert response.status_code == 201
    results = response.json()["results"]
    assert [r["ok"] for r in results] == [True, True]
    assert results[0]["url"] == f"/sessions/{results[0]['id']}/"
    assert results[0]["run_url"].startswith("/runs/")
    assert Transcript.objects.count() == 2


def test_form_upload_without_js_redirects_to_the_session(alice_client, short_jsonl):
    response = alice_client.post(
        "/sessions/upload/", {"file": SimpleUploadedFile("a.jsonl", short_jsonl.read_bytes())}
    )
    assert response.status_code == 302
    assert response["Location"] == Transcript.objects.get().get_absolute_url()


def test_upload_with_no_file_says_so(alice_client):
    response = alice_client.post("/sessions/upload/", {}, **JSON)
    assert response.status_code == 400
    assert "Choose at least one" in response.json()["results"][0]["message"]


def test_unusable_upload_reports_the_reason(alice_client):
    response = alice_client.post(
        "/sessions/upload/", {"file": SimpleUploadedFile("x.jsonl", b"garbage\n")}, **JSON
    )
    assert response.status_code == 400
    result = response.json()["results"][0]
    assert not result["ok"]
    assert "not a Claude Code transcript" in result["message"]


def test_oversize_upload_is_cut_off_while_streaming(alice_client, settings, short_jsonl):
    settings.UPLOAD_MAX_BYTES = 4096
    response = alice_client.post(
        "/sessions/upload/",
        {"file": SimpleUploadedFile("big.jsonl", short_jsonl.read_bytes())},
        **JSON,
    )
    assert response.status_code == 413
    [result] = response.json()["results"]
    assert "big.jsonl is larger than the upload limit of 4.0 KB (4096 bytes)" in result["message"]
    assert not Transcript.objects.exists()


def test_duplicate_upload_points_to_the_existing_session(alice_client, short_jsonl):
    payload = short_jsonl.read_bytes()
    alice_client.post("/sessions/upload/", {"file": SimpleUploadedFile("a.jsonl", payload)}, **JSON)
    response = alice_client.post(
        "/sessions/upload/", {"file": SimpleUploadedFile("b.jsonl", payload)}, **JSON
    )
    result = response.json()["results"][0]
    assert result["duplicate"] is True
    assert "already uploaded" in result["message"]
    assert Transcript.objects.count() == 1


def test_delete_is_owner_only_and_post_only(
    alice_client, mallory_client, make_transcript, short_jsonl
):
    transcript = make_transcript(short_jsonl)
    assert mallory_client.post(f"/sessions/{transcript.pk}/delete/").status_code == 404
    assert alice_client.get(f"/sessions/{transcript.pk}/delete/").status_code == 405
    response = alice_client.post(f"/sessions/{transcript.pk}/delete/")
    assert response.status_code == 302
    assert not Transcript.objects.exists()


def test_pages_send_a_strict_content_security_policy(alice_client):
    policy = alice_client.get("/sessions/")["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]


def test_list_polls_active_runs(alice_client, make_transcript, short_jsonl):
    make_transcript(short_jsonl)
    html = alice_client.get("/sessions/").content.decode()
    assert 'hx-trigger="every 1s"' in html
    assert "waiting for a worker" in html


def test_half_finished_upload_from_the_page_says_it_was_interrupted(alice_client, short_jsonl):
    data = short_jsonl.read_bytes()
    body = (
        b'--XYZ\r\nContent-Disposition: form-data; name="file"; filename="s.jsonl"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n" + data[:1000]
    )
    response = alice_client.generic(
        "POST",
        "/sessions/upload/",
        body,
        content_type="multipart/form-data; boundary=XYZ",
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 400
    assert "stopped before the end" in response.json()["results"][0]["message"]
    assert not Transcript.objects.exists()


def test_the_list_shows_the_recorded_replay_not_the_newest_whatif(
    client, user, make_transcript, tool_heavy_jsonl
):
    transcript = make_transcript(tool_heavy_jsonl)
    recorded = transcript.runs.get()
    runner.execute_run(recorded.pk)
    whatif = run_services.start_run(
        owner=user, transcript=transcript, mode="whatif", overrides={"autocompact_pct_override": 60}
    )
    client.force_login(user)
    html = client.get("/sessions/").content.decode()
    assert f'id="run-progress-{recorded.pk}"' in html
    assert f'id="run-progress-{whatif.pk}"' not in html
    assert "recorded · 1 what-if run" in html
    recorded.refresh_from_db()
    peak = recorded.summary["peak_model_tokens"]
    assert f'data-value="{peak}">{tokens(peak)}</td>' in html


def test_the_list_says_when_a_session_ran_for_how_long_on_which_models(
    alice_client, make_transcript, tool_heavy_jsonl
):
    transcript = make_transcript(tool_heavy_jsonl)
    run = transcript.runs.get()
    runner.execute_run(run.pk)
    run.refresh_from_db()
    requests = run_services.result_data(run)["requests"]
    html = alice_client.get("/sessions/").content.decode()
    first, last = requests[0]["timestamp"], requests[-1]["timestamp"]
    assert f'<time class="local-time short" datetime="{first}">' in html
    seconds = (engine.parse_time(last) - engine.parse_time(first)).total_seconds()
    assert f">{engine.format_duration(seconds)}</td>" in html
    for model in {r["model"] for r in requests}:
        assert model.removeprefix("claude-") in html


def test_a_session_is_titled_by_its_first_prompt(alice_client, make_transcript, tool_heavy_jsonl):
    transcript = make_transcript(tool_heavy_jsonl)
    runner.execute_run(transcript.runs.get().pk)
    messages = run_services.session_messages(transcript)["main"]
    prompt = next(m for m in messages if m["kind"] == "prompt")
    words = " ".join("".join(b["text"] for b in prompt["blocks"] if b["type"] == "text").split())
    html = alice_client.get("/sessions/").content.decode()
    title = re.search(r'<a href="/sessions/\d+/">(.*?)</a>', html).group(1)
    assert title.rstrip("…")
    assert words.startswith(html_unescape(title).rstrip("…"))
    assert f'<span class="file-name">{transcript.name}</span>' in html
