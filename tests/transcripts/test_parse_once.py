"""An upload is parsed once: the web's check leaves its parsed session in the session cache and
the worker's replay tokenizes that copy instead of reading the file again."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.conf import settings

from contextlab import engine
from contextlab.engine import session_cache
from contextlab.jobs import replay as runner
from contextlab.runs.models import Run
from contextlab.transcripts import services

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media")]


def parsed_copies() -> list[Path]:
    folder = Path(settings.SESSION_CACHE_DIR)
    return sorted(folder.glob(f"*{session_cache.PARSED_SUFFIX}")) if folder.exists() else []


@pytest.fixture
def empty_session_cache():
    folder = Path(settings.SESSION_CACHE_DIR)
    for path in folder.glob("*.pickle") if folder.exists() else []:
        path.unlink()
    session_cache._RECENT.clear()
    yield
    session_cache._RECENT.clear()


@pytest.mark.usefixtures("empty_session_cache")
def test_the_worker_replays_the_upload_without_parsing_it_again(user, short_jsonl, monkeypatch):
    data = short_jsonl.read_bytes()
    transcript, created = services.create_transcript(
        owner=user, name="short.jsonl", content=io.BytesIO(data)
    )
    assert created
    assert len(parsed_copies()) == 1

    def no_second_parse(*args, **kwargs):
        raise AssertionError("the worker parsed the upload again")

    monkeypatch.setattr(session_cache, "load_session", no_second_parse)
    run = transcript.runs.get()
    runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE, run.error
    # the tokenized copy replaced the parsed one
    assert parsed_copies() == []
    monkeypatch.undo()
    # the same replay as from a fresh parse of the file
    session = engine.load_session(str(short_jsonl))
    config, preset = engine.resolve_config("auto", version=session.version)
    fresh = engine.replay(session, config, preset_name=preset).to_json()
    stored = run.result.read()
    assert stored["summary"] == fresh["summary"]
    assert [r["model_tokens"] for r in stored["requests"]] == [
        r["model_tokens"] for r in fresh["requests"]
    ]


@pytest.mark.usefixtures("empty_session_cache")
def test_a_refused_upload_leaves_no_parsed_copy(user):
    with pytest.raises(services.UploadRejected):
        services.create_transcript(owner=user, name="g.jsonl", content=io.BytesIO(b"\xff" * 5000))
    assert parsed_copies() == []


@pytest.mark.usefixtures("empty_session_cache")
def test_a_duplicate_upload_parses_nothing(user, short_jsonl):
    data = short_jsonl.read_bytes()
    services.create_transcript(owner=user, name="a.jsonl", content=io.BytesIO(data))
    before = parsed_copies()
    _, created = services.create_transcript(owner=user, name="b.jsonl", content=io.BytesIO(data))
    assert not created
    assert parsed_copies() == before


@pytest.mark.usefixtures("empty_session_cache")
def test_an_unpicklable_session_is_still_a_good_upload(user, short_jsonl, monkeypatch):
    """The hand-over is only a speed-up: a session that cannot be pickled is stored anyway, and
    leaves no temporary file in the session cache."""
    import threading

    real = engine.load_session

    def with_a_lock(*args, **kwargs):
        session = real(*args, **kwargs)
        session.unpicklable = threading.Lock()  # type: ignore[attr-defined]
        return session

    monkeypatch.setattr(engine, "load_session", with_a_lock)
    transcript, created = services.create_transcript(
        owner=user, name="short.jsonl", content=io.BytesIO(short_jsonl.read_bytes())
    )
    assert created
    assert transcript.request_count > 0
    assert list(Path(settings.SESSION_CACHE_DIR).glob("*.tmp")) == []
    assert parsed_copies() == []
