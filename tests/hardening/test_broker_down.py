"""The task queue down while a session is uploaded: the upload and its run are kept, queued,
and the request succeeds (the run is sent again once the queue is back)."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.conftest import DEMO
from tests.hardening.conftest import run_with_broker_down

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import json, logging, django
    from django.core.management import call_command
    django.setup()
    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User
    from django.test import Client
    from contextlab.runs.models import Run
    logging.basicConfig(level=logging.WARNING)
    user = User.objects.create_user("u", password="pw-u-123456")
    client = Client()
    client.force_login(user)
    with open({path!r}, "rb") as fh:
        response = client.post("/sessions/upload/", {{"file": fh}}, HTTP_ACCEPT="application/json")
    runs = list(Run.objects.values_list("status", flat=True))
    with open({other!r}, "rb") as fh:
        # the form without JavaScript: a redirect, and the notice on the page it leads to
        form = client.post("/sessions/upload/", {{"file": fh, "name": "again"}})
    from django.contrib.messages import get_messages
    page = [form.status_code, [str(m) for m in get_messages(form.wsgi_request)]]
    print(json.dumps({{"status": response.status_code, "body": response.json(), "runs": runs,
                      "page": page}}))
    """
)


def test_an_upload_with_the_task_queue_down_is_kept_and_its_run_stays_queued(tmp_path):
    proc = run_with_broker_down(
        tmp_path,
        SCRIPT.format(
            path=str(DEMO / "marot__spotter__short.jsonl"),
            other=str(DEMO / "marot__spotter__tool_heavy.jsonl"),
        ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == 201, out
    assert out["body"]["results"][0]["ok"] is True
    assert out["runs"] == ["queued"]
    assert "your work is saved and its runs are queued" in out["body"]["notice"]
    status, notices = out["page"]
    assert status == 302
    assert any("task queue is unreachable" in notice for notice in notices), notices
    assert "task queue is unreachable" in proc.stderr
