"""Timing, not run by default (``CONTEXTLAB_LIVE_MB=4,16,64``): one live append of a synthetic
session of that many MB through the server, with the real PostgreSQL, as
``bench/bench_live.py`` cuts it (before its last turn): the web's append (``POST
/api/sessions/{id}/append``), the worker's update (``execute_run``: load, continue, store the
messages and the result, index), and the open explorer's next poll (this process held the
version before). Prints the seconds; bench/README.md quotes them."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from contextlab.jobs import replay as runner
from contextlab.runs.models import Run
from contextlab.search import services as search
from tests.conftest import ROOT
from tests.transcripts.test_live_append import append, create

SIZES = [float(mb) for mb in (os.environ.get("CONTEXTLAB_LIVE_MB") or "").split(",") if mb]

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("clean_media"),
    pytest.mark.skipif(not SIZES, reason="set CONTEXTLAB_LIVE_MB to time live appends"),
]


def _seconds(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = call()
    return time.perf_counter() - start, value


@pytest.mark.parametrize("megabytes", SIZES or [0])
def test_one_append_through_the_server(
    client, user, auth_header, django_capture_on_commit_callbacks, tmp_path, megabytes, monkeypatch
):
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_live import cut_before_last_requests
    from gen_synthetic import generate

    source = tmp_path / "synthetic.jsonl"
    generate(source, int(megabytes * 1024**2), seed=1)
    data = source.read_bytes()
    cut = cut_before_last_requests(data, 1)
    last_line = data.rfind(b"\n", 0, cut - 1) + 1
    with django_capture_on_commit_callbacks(execute=False):
        session = create(client, auth_header, data[:last_line])
    run = Run.objects.get(transcript_id=session["id"])
    runner.execute_run(run.pk)
    # the session goes live: the append before the timed one (its replay is whole)
    with django_capture_on_commit_callbacks(execute=False):
        assert append(client, auth_header, session["id"], last_line, data[last_line:cut])
    runner.execute_run(run.pk)
    run.refresh_from_db()
    count = len(run.result.requests())
    client.force_login(user)
    url = f"/sessions/{session['id']}/requests/{count - 1}/"
    assert client.get(url).status_code == 200  # the open explorer: this version held
    with django_capture_on_commit_callbacks(execute=False):
        web, response = _seconds(
            lambda: append(client, auth_header, session["id"], cut, data[cut:])
        )
    assert response.status_code == 200, response.content
    # when the result is stored: the worker indexes the session for search and stores the
    # result's findings after it (the explorer has the turn once it is stored)
    stored_at: list[float] = []
    index_after_run = search.index_after_run

    def index_after_the_result(*args: Any) -> None:
        stored_at.append(time.perf_counter())
        index_after_run(*args)

    monkeypatch.setattr(search, "index_after_run", index_after_the_result)
    started = time.perf_counter()
    worker, _ = _seconds(lambda: runner.execute_run(run.pk))
    (result_at,) = stored_at
    run.refresh_from_db()
    assert run.provisional
    poll, page = _seconds(
        lambda: client.get(url, {"live": "1", "follow": "1", "seen": ""}, HTTP_HX_REQUEST="true")
    )
    assert page.status_code == 200
    assert f'id="req-number">{count + 1}<' in page.content.decode()
    print(
        f"\n{megabytes:g} MB ({count + 1} requests): web {web:.2f} s, worker {worker:.2f} s"
        f" (result stored after {result_at - started:.2f} s), explorer poll {poll:.2f} s"
    )
