"""Redis (the cache and the rate limits' counter) stops while people use the site: login, the
sessions list, the report, the request explorer, share links (valid and wrong) and comments
answer as usual or 503, never 500.

The web side runs in its own process configured as production is (``CELERY_BROKER_URL`` on a
redis-server of this test's own, the cache on the same server), first with Redis up (the caches
fill, the limits count), then with that redis-server killed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import DEMO, ROOT, require_services, worker_env
from tests.hardening.test_queue_down_recovery import _free_port, _wait_listening

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

WEB = textwrap.dedent(
    """
    import json, sys, django
    django.setup()
    from django.contrib.auth.models import User
    from django.test import Client
    from contextlab.runs.models import Run
    from contextlab.jobs.replay import execute_run
    from contextlab.sharing import services as sharing
    from contextlab.transcripts import services as transcripts

    user = User.objects.create_user("cachedown", password="pw-cachedown-1")
    with open({path!r}, "rb") as fh:
        transcript, _ = transcripts.create_transcript(owner=user, name="s.jsonl", content=fh)
    run = Run.objects.get(transcript=transcript)
    execute_run(run.pk)
    _, token = sharing.create_share(user=user, transcript=transcript)

    def visit():
        out = {{}}
        visitor = Client(raise_request_exception=False)
        out["shared"] = visitor.get(f"/s/{{token}}/").status_code
        out["shared_request"] = visitor.get(f"/s/{{token}}/requests/0/").status_code
        out["wrong_token"] = visitor.get("/s/not-a-token/").status_code
        client = Client(raise_request_exception=False)
        response = client.post(
            "/accounts/login/", {{"username": "cachedown", "password": "pw-cachedown-1"}}
        )
        out["login"] = response.status_code
        out["list"] = client.get("/sessions/").status_code
        out["report"] = client.get(f"/sessions/{{transcript.pk}}/").status_code
        out["explorer"] = client.get(f"/sessions/{{transcript.pk}}/requests/0/").status_code
        out["comment"] = client.post(
            f"/sessions/{{transcript.pk}}/requests/0/comments/", {{"body": "still here"}}
        ).status_code
        api = Client(raise_request_exception=False)
        api.force_login(user)
        out["api_comment"] = api.post(
            f"/api/sessions/{{transcript.pk}}/comments",
            json.dumps({{"request": 0, "body": "and here"}}),
            content_type="application/json",
        ).status_code
        return out

    print(json.dumps({{"up": visit()}}), flush=True)
    sys.stdin.readline()  # the test stops Redis now
    print(json.dumps({{"down": visit()}}), flush=True)
    """
)


def test_pages_answer_without_redis(tmp_path: Path) -> None:
    require_services()
    port = _free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(port)
        env = worker_env(
            CELERY_BROKER_URL=f"redis://127.0.0.1:{port}/0",
            CELERY_TASK_DEFAULT_QUEUE=f"cache-down-{port}",
        )
        env.update(PYTHONPATH=str(ROOT), ALLOWED_HOSTS="testserver", STATIC_MANIFEST="false")
        env.pop("CACHE_URL", None)
        web = subprocess.Popen(
            [sys.executable, "-c", WEB.format(path=str(DEMO / "marot__spotter__short.jsonl"))],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert web.stdout is not None
        assert web.stdin is not None
        line = web.stdout.readline()
        if not line:
            pytest.fail(web.communicate(timeout=60)[1][-6000:])
        up = json.loads(line)["up"]
        redis.kill()
        redis.wait(timeout=10)
        out, err = web.communicate("go\n", timeout=300)
        assert web.returncode == 0, err[-6000:]
        down = json.loads(out.strip().splitlines()[-1])["down"]
    finally:
        if redis.poll() is None:
            redis.kill()
            redis.wait(timeout=10)
    expected = {
        "shared": 200,
        "shared_request": 200,
        "wrong_token": 404,
        "login": 302,
        "list": 200,
        "report": 200,
        "explorer": 200,
        "comment": 302,
        "api_comment": 201,
    }
    assert up == expected, (up, err[-3000:])
    for page, status in down.items():
        assert status == expected[page] or status == 503, (page, status, err[-3000:])
    # the outage is in the logs, once, not a traceback per request
    assert "failed, answering a miss" in err
