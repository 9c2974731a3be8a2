"""Tiny hand-written transcripts for engine tests: records built line by line."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

START = datetime(2026, 2, 1, 12, 0, 0, tzinfo=UTC)


@dataclass
class TranscriptBuilder:
    """Builds a Claude Code-style JSONL transcript; every call appends records."""

    version: str = "2.1.39"
    session_id: str = "11111111-2222-3333-4444-555555555555"
    model: str = "claude-opus-4-6"
    records: list[dict[str, Any]] = field(default_factory=list)
    last_uuid: str | None = None
    clock: datetime = START
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    usage_total: int = 20000

    def uuid(self) -> str:
        return f"00000000-0000-4000-8000-{next(self._ids):012d}"

    def tick(self, seconds: float = 2.0) -> str:
        self.clock += timedelta(seconds=seconds)
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"

    def envelope(self, rtype: str, parent: str | None, **extra: Any) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/work/project",
            "sessionId": self.session_id,
            "version": self.version,
            "gitBranch": "main",
            "type": rtype,
            "uuid": self.uuid(),
            "timestamp": self.tick(extra.pop("seconds", 2.0)),
        }
        rec.update(extra)
        return rec

    def add(self, rec: dict[str, Any], *, link: bool = True) -> dict[str, Any]:
        self.records.append(rec)
        if link:
            self.last_uuid = rec["uuid"]
        return rec

    def prompt(self, text: str, *, seconds: float = 30.0, **extra: Any) -> dict[str, Any]:
        return self.add(
            self.envelope(
                "user",
                self.last_uuid,
                seconds=seconds,
                message={"role": "user", "content": text},
                **extra,
            )
        )

    def assistant(
        self,
        blocks: list[dict[str, Any]],
        *,
        usage: dict[str, Any] | None = None,
        message_id: str | None = None,
        model: str | None = None,
        split: bool = True,
        grow: int = 500,
    ) -> list[dict[str, Any]]:
        """One API response, split into one record per block (as Claude Code writes it)."""
        mid = message_id or f"msg_{len(self.records):06d}"
        if usage is None:
            self.usage_total += grow
            usage = {
                "input_tokens": 3,
                "cache_creation_input_tokens": grow,
                "cache_read_input_tokens": self.usage_total - grow - 3,
                "output_tokens": 10,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": grow,
                    "ephemeral_1h_input_tokens": 0,
                },
            }
        out = []
        groups = [[b] for b in blocks] if split else [blocks]
        for group in groups:
            rec = self.envelope(
                "assistant",
                self.last_uuid,
                message={
                    "model": model or self.model,
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "content": group,
                    "stop_reason": None,
                    "usage": usage,
                },
                requestId=f"req_{mid}",
            )
            out.append(self.add(rec))
        return out

    def tool_call(
        self, name: str, tool_input: dict[str, Any], result: str | list[Any], **kw: Any
    ) -> str:
        tid = f"toolu_{len(self.records):06d}"
        recs = self.assistant(
            [{"type": "tool_use", "id": tid, "name": name, "input": tool_input}], **kw
        )
        self.tool_result(tid, result, parent=recs[-1]["uuid"])
        return tid

    def tool_result(
        self,
        tool_use_id: str,
        result: str | list[Any],
        *,
        parent: str | None = None,
        is_error: bool = False,
        **extra: Any,
    ) -> dict[str, Any]:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": result,
        }
        if is_error:
            block["is_error"] = True
        return self.add(
            self.envelope(
                "user",
                parent or self.last_uuid,
                message={"role": "user", "content": [block]},
                sourceToolAssistantUUID=parent,
                **extra,
            )
        )

    def system(self, subtype: str, **fields: Any) -> dict[str, Any]:
        return self.add(self.envelope("system", self.last_uuid, subtype=subtype, **fields))

    def compact(self, summary: str, pre_tokens: int, trigger: str = "auto") -> None:
        boundary = self.envelope(
            "system",
            None,
            subtype="compact_boundary",
            content="Conversation compacted",
            logicalParentUuid=self.last_uuid,
            compactMetadata={"trigger": trigger, "preTokens": pre_tokens},
        )
        self.add(boundary)
        self.add(
            self.envelope(
                "user",
                boundary["uuid"],
                message={"role": "user", "content": summary},
                isCompactSummary=True,
                isVisibleInTranscriptOnly=True,
            )
        )
        self.usage_total = 20000

    def text(self) -> str:
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.records)

    def write(self, path: Path) -> Path:
        path.write_text(self.text(), encoding="utf-8")
        return path
