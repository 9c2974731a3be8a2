"""An upload's check: the engine parses the stored file once, for the session's columns and to
leave the parse for its first replay (the session cache), and the parse is let go before that
replay runs.

Why a child process for large files: the parse of a multi-gigabyte session takes about as much
memory as its replay (1.4 GB at 2 GB), and a worker process that parsed it keeps much of that
heap after freeing it (the allocator's arenas), which the replay it runs next then adds to. A
child's memory all goes back to the system when it exits, so the worker's replay starts from
its usual size. Files below ``UPLOAD_CHECK_CHILD_MIN_BYTES`` are checked in the calling
process (a child's start, about a second, would dominate).

A child that dies (out of memory, killed) rejects the upload with a clear reason; nothing of
it is kept (``services.store_upload`` removes the stored file and any parse written).

Run as ``python -m contextlab.transcripts.upload_check``: reads the request (a pickled
``CheckRequest``) on stdin and writes the pickled ``Checked`` or ``services.UploadRejected`` to
the request's ``out`` file. Both ends are this module in this installation: the pickle never
crosses a trust boundary (the transcript's content is only ever parsed by the engine).
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckRequest:
    """What the check reads: the stored file and the columns the upload already knows."""

    path: Path
    name: str
    stored_name: str
    size: int
    sha256: str
    #: where to leave the parse for the replay (the session cache folder)
    cache_dir: Path
    #: the child's answer (pickled ``Checked`` or ``UploadRejected``)
    out: Path


@dataclass(frozen=True)
class Checked:
    """A file the engine read: the session row's columns (``services.session_fields``), the
    uuids of its records (to link the sessions that continue it) and the parse left for the
    replay in the session cache (None when it could not be written)."""

    fields: dict[str, Any]
    record_uuids: frozenset[str]
    parsed: Path | None


def check_here(request: CheckRequest) -> Checked:
    """The check in this process; ``services.UploadRejected`` for a file the engine refuses."""
    from contextlab import engine
    from contextlab.transcripts import services

    try:
        session = engine.load_session(str(request.path), name=request.name)
    except engine.TranscriptError as exc:
        # a reading error (a bomb stopped, a corrupt stream) is the reason worth naming
        errors = [p for p in exc.problems if p.severity == "error"]
        raise services.UploadRejected(
            f"{request.name}: {exc}" + (f" ({errors[0].message})" if errors else ""),
            [p.to_json() for p in exc.problems[: services.MAX_STORED_PROBLEMS]],
        ) from None
    except Exception:
        # An engine bug must not leave a half-imported session behind; the log has details.
        logger.exception("engine failed to load upload %s", request.name)
        raise services.UploadRejected(
            f"{request.name}: ContextLab could not read this file (internal error; see the "
            "server log)."
        ) from None
    try:
        fields = services.session_fields(
            session,
            stored_name=request.stored_name,
            name=request.name,
            size=request.size,
            sha256=request.sha256,
        )
        parsed = _keep_parse(request, session)
        return Checked(fields=fields, record_uuids=session.record_uuids, parsed=parsed)
    finally:
        session.close()


def _keep_parse(request: CheckRequest, session: Any) -> Path | None:
    """Leave the parse in the session cache for the first replay, so the worker does not read
    and parse the file a second time. Only a speed-up: a failure leaves the replay to parse
    the file itself. (The object store's mirror gets it from the caller, once the upload is
    kept.)"""
    from contextlab import engine

    try:
        return engine.keep_parsed(
            request.path, session, cache_dir=request.cache_dir, sha256=request.sha256
        )
    except Exception:  # an unpicklable oddity must not refuse a good upload
        logger.exception("could not keep the parsed session of %s for its replay", request.name)
        return None


def check(request_path: Path, **columns: Any) -> Checked:
    """``check_here`` of the stored file ``request_path``, in a child process when the file is
    at least ``UPLOAD_CHECK_CHILD_MIN_BYTES`` (0: never). ``columns``: ``CheckRequest``'s
    ``name``, ``stored_name``, ``size`` and ``sha256``."""
    threshold = settings.UPLOAD_CHECK_CHILD_MIN_BYTES
    size = request_path.stat().st_size
    with tempfile.TemporaryDirectory(prefix="contextlab-check-") as folder:
        request = CheckRequest(
            path=request_path,
            cache_dir=Path(settings.SESSION_CACHE_DIR),
            out=Path(folder) / "checked.pickle",
            **columns,
        )
        if not threshold or size < threshold:
            return check_here(request)
        return _check_in_child(request)


def child_command() -> list[str]:
    """The child's command line (a function: a test replaces it with one that dies)."""
    return [sys.executable, "-m", "contextlab.transcripts.upload_check"]


def _check_in_child(request: CheckRequest) -> Checked:
    from contextlab.transcripts import services

    # the settings this process runs with (a worker's, a test run's; under
    # ``override_settings`` SETTINGS_MODULE is None, the environment still names them)
    module = os.environ.get("DJANGO_SETTINGS_MODULE") or settings.SETTINGS_MODULE
    env = dict(os.environ, DJANGO_SETTINGS_MODULE=module or "contextlab.settings")
    completed = subprocess.run(
        child_command(),
        input=pickle.dumps(request),
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        check=False,
    )
    answer: object = None
    if completed.returncode == 0 and request.out.exists():
        with request.out.open("rb") as fh:
            answer = pickle.load(fh)  # written by this module's child, not by a user
    if isinstance(answer, services.UploadRejected):
        raise answer
    if isinstance(answer, Checked):
        return answer
    # the child died (out of memory, killed) or crashed: the caller's cleanup, which the
    # rejection below triggers, removes the stored file
    stderr = completed.stderr.decode("utf-8", "replace")[-4000:]
    logger.error(
        "the check of upload %s stopped (exit status %s): %s",
        request.name,
        completed.returncode,
        stderr,
    )
    raise services.UploadRejected(
        f"{request.name}: the check of this file stopped before it finished "
        f"({_how_it_ended(completed.returncode)}); nothing was kept. Upload it again; if it "
        "fails again, the server may be short of memory for a file this large (the "
        "administrator's log has the details).",
        status=503,
    )


def _how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}" + (", out of memory?" if -returncode == signal.SIGKILL else "")
    return f"exit status {returncode}"


def _child_main() -> int:
    import django

    django.setup()
    request: CheckRequest = pickle.loads(sys.stdin.buffer.read())  # from our parent
    from contextlab.transcripts import services

    answer: Checked | services.UploadRejected
    try:
        answer = check_here(request)
    except services.UploadRejected as exc:
        answer = exc
    partial = request.out.with_suffix(".partial")
    with partial.open("wb") as fh:
        pickle.dump(answer, fh, protocol=pickle.HIGHEST_PROTOCOL)
    partial.replace(request.out)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    # through the module's own name: what it pickles must unpickle in the parent as
    # ``contextlab.transcripts.upload_check``'s classes, not ``__main__``'s
    from contextlab.transcripts import upload_check

    sys.exit(upload_check._child_main())
