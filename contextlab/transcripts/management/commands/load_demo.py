"""``manage.py load_demo``: a demo user with two sessions, for ``make run``."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from contextlab.transcripts import services

DEMO_FILES = ("marot__spotter__short.jsonl", "marot__spotter__tool_heavy.jsonl")
BUNDLED = Path(__file__).resolve().parents[3] / "demo"


def corpus_dir() -> Path:
    """The transcript corpus, as the tests find it: ``$CONTEXTLAB_CORPUS``, else
    ``../shared/corpus`` beside the checkout (absent in a plain clone)."""
    return Path(
        os.environ.get("CONTEXTLAB_CORPUS") or Path(settings.BASE_DIR).parent / "shared" / "corpus"
    )


def demo_source(name: str) -> Path:
    """A demo file from the corpus when it has it, else the bundled copy (the same bytes)."""
    shared = corpus_dir() / name
    return shared if shared.is_file() else BUNDLED / name


class Command(BaseCommand):
    help = "Create the demo user (printing its password) and load two demo sessions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="demo")

    def handle(self, *args: Any, **options: Any) -> None:
        username: str = options["username"]
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=username)
        # Keep the password across restarts so an open browser tab stays logged in.
        password_file = Path(settings.VAR_DIR) / f"{username}-password.txt"
        if created or not password_file.exists():
            password = secrets.token_urlsafe(9)
            user.set_password(password)
            user.save()
            password_file.parent.mkdir(parents=True, exist_ok=True)
            password_file.write_text(password)
        password = password_file.read_text().strip()
        for name in DEMO_FILES:
            source = demo_source(name)
            with source.open("rb") as fh:
                transcript, new = services.create_transcript(owner=user, name=name, content=fh)
            self.stdout.write(
                f"{'loaded' if new else 'already loaded'}: {transcript.name} ({source.parent})"
            )
        self.stdout.write(self.style.SUCCESS(f"log in as {username!r} with password {password!r}"))
