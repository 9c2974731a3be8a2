"""The database-sensitive rows of the upload attack table, marked integration so a run of
``-m integration`` checks them on PostgreSQL: NUL characters (text and jsonb refuse them),
32-bit integer columns, varchar lengths and jsonb's number rules."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.hardening import test_hostile_uploads as table

POSTGRES_SENSITIVE = {
    "usage 3e9 (int32)",
    "usage 3e9 float",
    "usage 2*2**62",
    "usage Infinity",
    "usage NaN",
    "NUL in content",
    "NUL in sessionId",
    "sessionId of 500 chars",
    "lone surrogate in content",
    "surrogate in a key",
    "2**70 in a tool input",
}
CASES = [a for a in table.ATTACKS if a.name in POSTGRES_SENSITIVE]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db,
    pytest.mark.usefixtures("clean_media"),
]


@pytest.mark.parametrize("attack", CASES, ids=[a.name for a in CASES])
def test_hostile_upload_on_postgres(attack, client, alice_client, auth_header, request) -> None:
    if not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        pytest.skip("the PostgreSQL twin of the attack table (the unit run covers SQLite)")
    table.test_hostile_upload(attack, client, alice_client, auth_header, request)


def test_every_postgres_case_is_in_the_table() -> None:
    assert {a.name for a in CASES} == POSTGRES_SENSITIVE
