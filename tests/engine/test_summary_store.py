"""Summaries served from a store: a miss asks for the summary instead of waiting for it."""

from __future__ import annotations

import pickle

import pytest

from contextlab import engine
from tests.engine.test_pipeline import SMALL_WINDOW, long_session

#: sha256 of a fixed two-message input, computed before the summarizer modules were moved
KNOWN_DIGEST = "afc5b635a4845d9e31ba74ec5fe6f56361eb3feb15c97bfe9509d07be2d0050e"


def test_replay_stops_at_a_missing_summary_then_completes_from_the_store(tmp_path):
    session = engine.load_session(str(long_session(30).write(tmp_path / "s.jsonl")))
    config = engine.get_preset("claude-code-2.1.88").replace(**SMALL_WINDOW)
    store: dict[str, engine.SummaryResult] = {}
    summarizer = engine.StoredSummarizer(backend="anthropic", model="claude-test", lookup=store.get)
    fetched = []
    for _attempt in range(20):
        try:
            result = engine.replay(session, config, mode="whatif", summarizer=summarizer).to_json()
            break
        except engine.SummaryPending as pending:
            fetched.append(pending.key)
            store[pending.key] = engine.SummaryResult(
                text=f"<summary>stored {len(fetched)}</summary>",
                backend="anthropic",
                model="claude-test",
            )
    else:
        pytest.fail("the replay never completed")
    assert all(key.startswith("anthropic|claude-test|") for key in fetched)
    assert len(set(fetched)) == len(fetched)  # never asked twice for the same summary
    compactions = [e for r in result["requests"] for e in r["events"] if e["step"] == "autocompact"]
    assert len(compactions) == len(fetched) >= 1
    texts = [s["text"] for s in result["views"]["synthetic"] if s["kind"] == "summary"]
    assert all("Summary:\nstored" in t for t in texts)
    # a second run makes no request at all
    again = engine.replay(session, config, mode="whatif", summarizer=summarizer).to_json()
    assert again == result


def test_summary_key_depends_on_backend_model_and_input(tmp_path):
    session = engine.load_session(str(long_session(3).write(tmp_path / "s.jsonl")))
    request = engine.SummaryRequest(messages=session.main.messages[:4])
    other = engine.SummaryRequest(messages=session.main.messages[:5])
    assert engine.summary_key(request, "anthropic", "m1") != engine.summary_key(
        request, "anthropic", "m2"
    )
    assert engine.summary_key(request, "anthropic", "m1") != engine.summary_key(
        request, "openai", "m1"
    )
    assert engine.summary_key(request, "anthropic", "m1") != engine.summary_key(
        other, "anthropic", "m1"
    )
    assert engine.summary_key(request, "anthropic", "m1") == engine.summary_key(
        engine.SummaryRequest(messages=session.main.messages[:4]), "anthropic", "m1"
    )


def test_the_rendered_prompt_keeps_tool_ids_inputs_errors_and_media():
    """The backend gets the tool ids and inputs, error flags and nested media of the
    summarized messages (the resumed replay rebuilds the request: it never travels as JSON)."""
    from contextlab.engine.input.model import Block, Message
    from contextlab.engine.summarizing.rendering import render_conversation

    messages = [
        Message(uuid="u1", role="user", kind="prompt", blocks=[Block("text", "fix the parser")]),
        Message(
            uuid="a1",
            role="assistant",
            kind="assistant",
            blocks=[
                Block("thinking", "hmm"),
                Block(
                    "tool_use",
                    'Read{"file_path": "/src/parse.py"}',
                    tool_use_id="toolu_1",
                    tool_name="Read",
                    data={"file_path": "/src/parse.py"},
                ),
            ],
        ),
        Message(
            uuid="u2",
            role="user",
            kind="tool_result",
            blocks=[
                Block(
                    "tool_result",
                    "No such file",
                    tool_use_id="toolu_1",
                    tool_name="Read",
                    is_error=True,
                    media=2,
                )
            ],
        ),
    ]
    request = engine.SummaryRequest(messages=messages, prompt="Summarize.")
    rendered = "\n".join(
        part
        for turn in render_conversation(request.messages, request.prompt)
        for part in turn.parts
    )
    assert '[Tool call toolu_1: Read] {"file_path": "/src/parse.py"}' in rendered
    assert "(error)" in rendered
    assert rendered.count("[image]") == 2
    assert "hmm" not in rendered  # thinking is never sent
    assert rendered.endswith("Summarize.")
    extract = engine.ExtractiveSummarizer().summarize(request).text
    assert "/src/parse.py" in extract
    assert "No such file" in extract


def test_the_summary_key_of_a_known_input_never_changes():
    """Stored summaries are found by this key: a change to the prompt, its version or the
    hashed rendering would orphan every one of them."""
    from contextlab.engine.input.model import Block, Message

    request = engine.SummaryRequest(
        messages=[
            Message(uuid="u", role="user", kind="prompt", blocks=[Block("text", "fix it")]),
            Message(uuid="a", role="assistant", kind="assistant", blocks=[Block("text", "done")]),
        ]
    )
    assert engine.PROMPT_VERSION == "contextlab-compact-1"
    assert engine.summary_key(request, "anthropic", "claude-x") == (
        "anthropic|claude-x|contextlab-compact-1|compact|" + KNOWN_DIGEST
    )


def test_a_checkpointed_replay_resumes_where_it_stopped_and_matches_a_full_one(tmp_path):
    session = engine.load_session(str(long_session(30).write(tmp_path / "s.jsonl")))
    config = engine.get_preset("claude-code-2.1.88").replace(**SMALL_WINDOW)
    store: dict[str, engine.SummaryResult] = {}
    summarizer = engine.StoredSummarizer(backend="anthropic", model="m", lookup=store.get)
    progress: list[tuple[int, int]] = []
    checkpoints = 0
    try:
        result = engine.replay(
            session, config, mode="whatif", summarizer=summarizer, checkpoint=True
        )
    except engine.SummaryPending as first:
        pending = first
    else:
        pytest.fail("expected the replay to need a summary")
    while True:
        assert pending.checkpoint
        checkpoints += 1
        store[pending.key] = engine.SummaryResult(
            text=f"<summary>stored {checkpoints}</summary>", backend="anthropic"
        )
        try:
            result = engine.resume(
                pending.checkpoint,
                session,
                summarizer=summarizer,
                progress=lambda d, t: progress.append((d, t)),
            ).to_json()
            break
        except engine.SummaryPending as again:
            pending = again
    full = engine.replay(session, config, mode="whatif", summarizer=summarizer).to_json()
    assert result == full
    assert checkpoints >= 1
    assert progress
    assert progress[-1][0] == progress[-1][1]  # counted to the end, not from zero again


def test_a_checkpoint_from_another_engine_version_is_refused(tmp_path):
    session = engine.load_session(str(long_session(3).write(tmp_path / "s.jsonl")))
    with pytest.raises(ValueError, match="another engine version"):
        engine.resume(pickle.dumps((0, None)), session, summarizer=engine.ExtractiveSummarizer())


def test_a_checkpoint_naming_classes_that_moved_is_refused_before_it_is_unpickled(tmp_path):
    """A checkpoint of the version-2 format pickled ``(2, contextlab.engine.replay._Replay)``:
    that class no longer exists, so unpickling it would raise; it is refused as another
    version's instead, and the run replays from the start."""
    old_format = b"\x80\x02(K\x02ccontextlab.engine.replay\n_Replay\n)\x81t."  # (2, _Replay())
    with pytest.raises(AttributeError):
        pickle.loads(old_format)
    session = engine.load_session(str(long_session(3).write(tmp_path / "s.jsonl")))
    with pytest.raises(ValueError, match="another engine version"):
        engine.resume(old_format, session, summarizer=engine.ExtractiveSummarizer())
