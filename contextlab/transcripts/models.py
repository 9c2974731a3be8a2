"""An uploaded Claude Code session (one transcript file or session-folder archive)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from contextlab import blobs, engine
from contextlab.transcripts import naming

#: The largest id a row can have (BigAutoField); ids past it name nothing, and SQLite cannot
#: even bind them (OverflowError), so inputs are checked against it before any query.
MAX_ROW_ID = 2**63 - 1
#: Sessions a replay follows back through ``continues`` (a session resumed this many times
#: in a row is rare; the cap bounds the work a chain of hostile files can cause).
MAX_CHAIN = 20
#: the agent of a transcript that does not say otherwise (the first and, for a while, only one)
DEFAULT_AGENT = "claude_code"


class Transcript(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="transcripts"
    )
    #: who sees and changes it: the members of this workspace (``contextlab.workspaces.access``)
    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="transcripts"
    )
    name = models.CharField(max_length=255)
    #: the session's title as Claude Code shows it (custom-title, else ai-title, else summary
    #: record); empty when the transcript has none, and the first prompt stands in
    title = models.CharField(max_length=200, blank=True, default="")
    #: the first prompt the user typed, markup stripped (``naming.first_prompt``): the name
    #: when there is no title
    first_prompt = models.CharField(max_length=200, blank=True, default="")
    #: when the session's first record was written (None when no record carries a time)
    started_at = models.DateTimeField(null=True, blank=True)
    #: path of the stored upload, relative to MEDIA_ROOT
    #: the folder Claude Code ran in (the first recorded ``cwd``); empty when none is recorded
    project = models.CharField(max_length=500, blank=True, default="")
    file = models.CharField(max_length=500)
    size = models.BigIntegerField()
    #: hex SHA-256 of the uploaded bytes: the same file uploaded twice is stored once per workspace
    sha256 = models.CharField(max_length=64)
    session_id = models.CharField(max_length=100, blank=True)
    version = models.CharField(max_length=40, blank=True)
    #: the agent that wrote the transcript: the engine's source adapter that read it
    #: (``claude_code``, ``codex``), recognised from the content
    agent = models.CharField(max_length=40, default=DEFAULT_AGENT, db_index=True)
    request_count = models.PositiveIntegerField(default=0)
    #: the largest prompt a response recorded: over 200k means the session had the 1M window
    max_prompt_tokens = models.PositiveIntegerField(default=0)
    #: [{id, kind, messages}] per thread
    threads: models.JSONField[list[dict[str, Any]]] = models.JSONField(default=list)
    #: the engine's problems, [{file, line, code, message, severity}]
    problems: models.JSONField[list[dict[str, Any]]] = models.JSONField(default=list)
    #: the ``parentUuid`` the main conversation's first record hangs from when that record is
    #: not in the file (a resumed session's new file); empty for a file that starts the session
    continues_uuid = models.CharField(max_length=100, blank=True, default="")
    #: the session of the same workspace whose transcript holds that record: replays read the
    #: two as one conversation (``jobs.replay.load_session``)
    continues = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="continued_by"
    )
    #: a live session's bytes past its last whole line (``transcripts.live``): kept until the
    #: append that ends the line; the client's offset counts them (``size + len(live_tail)``)
    live_tail = models.BinaryField(blank=True, default=b"")
    #: when bytes were last appended (``contextlab watch``); pages poll a session appended
    #: to within ``LIVE_SESSION_WINDOW`` seconds
    appended_at = models.DateTimeField(null=True, blank=True)
    #: the digest of the file before the last append: the worker reuses that version's token
    #: counts (``engine.load_session_cached``'s ``seed_sha256``)
    previous_sha256 = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "-pk")
        constraints = (
            models.UniqueConstraint(
                fields=["workspace", "sha256"], name="transcript_unique_per_workspace"
            ),
        )
        verbose_name = "session"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("runs:report", args=[self.pk])

    @property
    def display_name(self) -> str:
        """The session's one name on every page (``naming.display_name``)."""
        return naming.display_name(self.title, self.first_prompt, self.name)

    @property
    def problem_count(self) -> int:
        """Problems a person should look at: an info notice (such as "N more problems not
        listed", or a record kept as-is) is listed, not counted."""
        return sum(1 for p in self.problems if p.get("severity") != "info")

    @property
    def when(self) -> datetime:
        """When the session ran (its first record), else when it was uploaded."""
        return self.started_at or self.created_at

    @property
    def agent_label(self) -> str:
        """The agent's name as people know it (``Claude Code``, ``Codex``)."""
        return agent_label(self.agent)

    @property
    def received(self) -> int:
        """Bytes of the transcript the server holds, a partial last line included: where the
        next append starts."""
        return self.size + len(self.live_tail)

    @property
    def is_live(self) -> bool:
        """Appended to within the last ``LIVE_SESSION_WINDOW`` seconds."""
        if self.appended_at is None:
            return False
        age = (timezone.now() - self.appended_at).total_seconds()
        return age < settings.LIVE_SESSION_WINDOW

    @property
    def project_name(self) -> str:
        """The project folder's own name (``/home/ann/code/spotter`` → ``spotter``)."""
        return self.project.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]

    @property
    def path(self) -> str:
        """A local path holding the stored transcript (``blobs.local_path``: with an object
        store, this host's copy, fetched on first use)."""
        return str(blobs.local_path(self.file))

    def earlier_sessions(self) -> list[Transcript]:
        """The sessions this one continues, earliest first: ``continues`` followed back within
        the workspace (a link that leaves it is never followed), at most ``MAX_CHAIN`` of
        them; a loop of links stops where it comes back."""
        chain: list[Transcript] = []
        seen = {self.pk}
        node = self.continues
        while (
            node is not None
            and node.pk not in seen
            and node.workspace_id == self.workspace_id
            and len(chain) < MAX_CHAIN
        ):
            chain.insert(0, node)
            seen.add(node.pk)
            node = node.continues
        return chain


#: ``TranscriptMessages.data`` of messages stored in parts (``TranscriptMessagesPart``)
IN_PARTS = "_in_parts"


class TranscriptMessages(models.Model):
    """The session's messages, once per session (``engine.messages_json``), for the explorer.

    Stored in parts (``TranscriptMessagesPart``, ``engine.messages_json_parts``): ``data``
    holds the rest (``engine.messages_json_head``) and ``IN_PARTS``. One JSON value of every
    message would not fit PostgreSQL's ``jsonb`` (256 MB a value) past sessions of about
    550 MB. A row stored whole (before parts) is read as it is."""

    transcript = models.OneToOneField(
        Transcript, on_delete=models.CASCADE, primary_key=True, related_name="messages"
    )
    data: models.JSONField[dict[str, Any]] = models.JSONField(default=dict)
    #: the digest of the session's file these messages are of, with the rows appended since
    #: (``AppendedMessages``); "" for messages stored before it was kept (of the current file:
    #: those were deleted when it changed)
    sha256 = models.CharField(max_length=64, blank=True, default="", db_default="")
    #: ``engine.message_marks`` of that file's session (each thread's id, message count and
    #: last message's uuid): what the next append's rows are stored after; None when not kept
    #: (written by ``COPY``, which sets only the data: the worker sets these after it)
    marks: models.JSONField[list[list[Any]] | None] = models.JSONField(null=True, blank=True)
    #: not stored: set on the messages a live session's append deletes (its file grew by
    #: whole lines), which tells the search index what it may keep (``search.signals``)
    grown_by_append = False

    def __str__(self) -> str:
        return f"messages of session {self.transcript_id}"

    def read(self) -> dict[str, Any]:
        """``engine.messages_json`` of the session, as stored."""
        data: dict[str, Any] = self.data
        if not data.get(IN_PARTS):
            return data
        head = {k: v for k, v in data.items() if k != IN_PARTS}
        parts = ({"thread": thread, "rows": rows} for thread, rows in self.pieces())
        joined: dict[str, Any] = engine.join_messages_parts(head, parts)
        return joined

    def pieces(self) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """(thread, its next rows) of the stored messages in order, one part in memory at a
        time (a thread's rows run on over consecutive pieces); the threads' rows only."""
        if not self.data.get(IN_PARTS):
            for thread, rows in self.data.items():
                if isinstance(rows, list):  # (not the shared prefixes)
                    yield thread, rows
            return
        parts = self.parts.order_by("seq").values_list("data", flat=True)
        for data in parts.iterator(chunk_size=1):
            yield data["thread"], data["rows"]

    @classmethod
    def of_file(cls, transcript: Transcript) -> TranscriptMessages | None:
        """The stored messages of the session's file (the rows appended since after them), or
        None when none are stored for its file (yet)."""
        stored = cls.objects.filter(transcript=transcript).only("sha256", "data").first()
        if stored is None or stored.sha256 not in ("", transcript.sha256):
            return None
        return stored

    @classmethod
    def current_data(cls, transcript: Transcript) -> dict[str, Any] | None:
        """``engine.messages_json`` of the session's file as stored (with the rows appended
        since put in), or None when none are stored for its file (yet)."""
        stored = cls.of_file(transcript)
        return None if stored is None else stored.with_appended()

    def with_appended(self) -> dict[str, Any]:
        """``read()`` with the rows appended since put in."""
        data = self.read()  # its parts joined
        for part in AppendedMessages.objects.filter(messages_id=self.pk).values_list(
            "data", flat=True
        ):
            data = engine.apply_appended_messages(data, part)
        return data

    @classmethod
    def current_pieces(
        cls, transcript: Transcript, stored: TranscriptMessages | None = None
    ) -> Iterator[tuple[str, list[dict[str, Any]]]] | None:
        """(thread, its next rows) of the session's file's messages as stored (``pieces``:
        one part in memory at a time), or None when none are stored for its file (yet). A live
        session's, with rows appended since, are read whole and the rows put in. ``stored``:
        ``of_file(transcript)``, when the caller read it already."""
        stored = stored if stored is not None else cls.of_file(transcript)
        if stored is None:
            return None
        if not stored.appended.exists():
            return stored.pieces()
        data = stored.with_appended()
        return ((thread, rows) for thread, rows in data.items() if isinstance(rows, list))

    @classmethod
    def appended_since(
        cls, transcript: Transcript, earlier_sha256: str
    ) -> list[dict[str, Any]] | None:
        """The appended rows that bring the stored messages of the file of digest
        ``earlier_sha256`` to the session's file (in order), or None when they are not so
        stored (then read them whole: ``current_data``)."""
        current = cls.objects.filter(transcript=transcript, sha256=transcript.sha256).exists()
        if not current or not earlier_sha256 or earlier_sha256 == transcript.sha256:
            return None
        parts = list(
            AppendedMessages.objects.filter(messages_id=transcript.pk).values_list(
                "pk", "previous_sha256", "sha256"
            )
        )
        since = [n for n, part in enumerate(parts) if part[1] == earlier_sha256]
        if not since:
            return None
        chain = parts[since[-1] :]
        if chain[-1][2] != transcript.sha256 or any(
            later[1] != part[2] for part, later in itertools.pairwise(chain)
        ):
            return None
        # only these parts' rows are read: the work grows with what was appended since
        rows = dict(
            AppendedMessages.objects.filter(pk__in=[part[0] for part in chain]).values_list(
                "pk", "data"
            )
        )
        return [rows[part[0]] for part in chain]


class TranscriptMessagesPart(models.Model):
    """Consecutive rows of one thread of a session's stored messages (``TranscriptMessages``):
    ``{"thread": id, "rows": [...]}`` (``engine.messages_json_parts``)."""

    messages = models.ForeignKey(TranscriptMessages, on_delete=models.CASCADE, related_name="parts")
    seq = models.PositiveIntegerField()
    data: models.JSONField[dict[str, Any]] = models.JSONField()

    class Meta:
        constraints = (
            models.UniqueConstraint(fields=["messages", "seq"], name="transcript_messages_part"),
        )

    def __str__(self) -> str:
        return f"part {self.seq} of the messages of session {self.messages_id}"


class AppendedMessages(models.Model):
    """The rows of a live session's messages an append changed or added
    (``engine.appended_messages_json``), stored after the session's ``TranscriptMessages`` (and
    the parts before this one) instead of every message again: per thread, the stored rows
    from ``start`` on are replaced by these (``TranscriptMessages.current_data``)."""

    messages = models.ForeignKey(
        TranscriptMessages, on_delete=models.CASCADE, related_name="appended"
    )
    #: the file these rows bring the messages to, and the one they extend
    sha256 = models.CharField(max_length=64)
    previous_sha256 = models.CharField(max_length=64)
    data: models.JSONField[dict[str, dict[str, Any]]] = models.JSONField()

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"messages appended to session {self.messages_id} ({self.sha256[:12]})"


class ResumableUpload(models.Model):
    """A transcript arriving in pieces over the tus protocol (``transcripts.resumable``): each
    piece is stored as it streams in (``incoming/<id>/<offset>``), so a dropped connection
    costs one piece, not the upload. Once whole, a worker joins the pieces into a session."""

    class State(models.TextChoices):
        RECEIVING = "receiving"
        #: every byte arrived: queued for a worker to store it as a session
        COMPLETE = "complete"
        STORED = "stored"
        REJECTED = "rejected"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="resumable_uploads"
    )
    workspace = models.ForeignKey(
        "workspaces.Workspace", on_delete=models.CASCADE, related_name="resumable_uploads"
    )
    name = models.CharField(max_length=255)
    #: the declared total (``Upload-Length``), bytes
    length = models.BigIntegerField()
    #: bytes received and stored so far (``Upload-Offset``)
    offset = models.BigIntegerField(default=0)
    #: [[offset, size, stored name], …] of the pieces, in order
    pieces: models.JSONField[list[list[Any]]] = models.JSONField(default=list)
    state = models.CharField(max_length=16, choices=State.choices, default=State.RECEIVING)
    #: the session it became (or the one it duplicated or grew)
    transcript = models.ForeignKey(
        Transcript, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: ``created``, ``duplicate`` or ``grew`` once stored
    outcome = models.CharField(max_length=16, blank=True, default="")
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = (models.Index(fields=["state", "updated_at"]),)

    def __str__(self) -> str:
        return f"{self.name} ({self.offset}/{self.length})"


def agent_label(agent: str | None) -> str:
    """``agent``'s name as people know it; none (a share snapshot taken before transcripts
    recorded their agent) is Claude Code's, the only agent there was."""
    name = agent or DEFAULT_AGENT
    return engine.AGENT_LABELS.get(name, name)


def of_agent(
    queryset: models.QuerySet[Transcript], agent: str | None
) -> models.QuerySet[Transcript]:
    """The sessions of ``queryset`` that ``agent`` wrote (all of them for None); an agent the
    engine does not know is a ``FieldError`` on ``agent``."""
    if agent is None:
        return queryset
    if agent not in engine.AGENT_LABELS:
        known = ", ".join(engine.AGENT_LABELS)
        raise engine.FieldError("agent", f"unknown agent {agent[:40]!r}: one of {known}")
    return queryset.filter(agent=agent)
