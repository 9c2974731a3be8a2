"""The engine's version as its results see it: stored with every finished run, so that a
comparison, sweep or advice request reuses a stored run only if this engine would give the
same result (``tuning.services.reusable_run``)."""

from __future__ import annotations

#: Bump by hand (one up) in any change that alters a replay's result: a number, an event, a
#: block's text or a key of the result JSON, or the waste findings and idle answer the worker
#: stores with it (``jobs.replay.waste_report``). A refactor or speed-up that keeps every result
#: identical keeps it, so the runs stored before stay reusable.
#: Chosen over a digest of the engine's source files, which would also change on every comment,
#: rename or speed-up (5 people edit the engine at once) and so throw away every stored run,
#: costly to replay again, on each deploy, while a worker host whose copy differs only in
#: formatting would disagree with the web about it.
ENGINE_VERSION = 4
