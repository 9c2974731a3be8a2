"""The agent that wrote a session, by name, for pages that hold a snapshot's plain ``agent``
(a shared report, the HTML export) rather than a ``Transcript``."""

from __future__ import annotations

from django import template

from contextlab.transcripts import models

register = template.Library()


@register.filter
def agent_label(agent: str | None) -> str:
    return models.agent_label(agent)
