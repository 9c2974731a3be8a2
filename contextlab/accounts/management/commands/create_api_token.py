"""``manage.py create_api_token USERNAME``: print a new API token (the user is created if missing)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from contextlab.accounts import services


class Command(BaseCommand):
    help = "Create an API token for USERNAME (creating the user if needed) and print it once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="a label for the token")
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            help="days until it expires (default API_TOKEN_DAYS; 0: never)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            _, token, created = services.create_api_token(
                username=options["username"], name=options["name"], days=options["days"]
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if created:
            self.stderr.write(f"created user {options['username']!r} (no password; token only)")
        self.stdout.write(token)
