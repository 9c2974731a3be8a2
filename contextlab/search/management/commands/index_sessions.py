"""``manage.py index_sessions``: put the sessions stored before the search index into it (the
periodic recovery does the same a few sessions per pass); ``--all`` rebuilds every session's."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from contextlab.search import services
from contextlab.transcripts.models import Transcript


class Command(BaseCommand):
    help = "Index the sessions not yet in the search index (--all: every session again)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true", help="rebuild every session's index")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["all"]:
            count = 0
            for transcript in Transcript.objects.order_by("pk").iterator():
                if services.index_session(transcript) is not None:
                    count += 1
        else:
            count = len(services.index_missing())
        self.stdout.write(f"{count} session{'' if count == 1 else 's'} indexed")
