"""Issue #11: a shared page loads within 1.5 x the owner's page (the largest entireio corpus
session; the best of 7 of each, interleaved, so that machine noise hits both alike)."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from contextlab.jobs import replay as runner
from contextlab.sharing import services
from tests.conftest import corpus_path

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_media"), pytest.mark.slow]


def best_of(fetches, runs: int = 7) -> list[float]:
    """The best time of each fetch, the fetches interleaved run after run."""
    for fetch in fetches:
        fetch()  # warm: the owner's page caches the result and messages in the process
    best = [float("inf")] * len(fetches)
    for _ in range(runs):
        for i, fetch in enumerate(fetches):
            started = time.perf_counter()
            response = fetch()
            best[i] = min(best[i], time.perf_counter() - started)
            assert response.status_code == 200
    return best


def test_shared_pages_load_within_1_5_x_the_owners(make_transcript, alice_client, user):
    transcript = make_transcript(corpus_path("entireio__cli__25_730c662552_0_full.jsonl"))
    runner.execute_run(transcript.runs.get().pk)
    _, token = services.create_share(user=user, transcript=transcript)
    anonymous = Client()
    pairs = {
        "report": (f"/sessions/{transcript.pk}/", f"/s/{token}/"),
        "explorer": (f"/sessions/{transcript.pk}/requests/100/", f"/s/{token}/requests/100/"),
    }
    for page, (own, shared) in pairs.items():
        own_s, shared_s = best_of(
            [lambda own=own: alice_client.get(own), lambda shared=shared: anonymous.get(shared)]
        )
        print(f"{page}: owner {own_s:.3f} s, shared {shared_s:.3f} s ({shared_s / own_s:.2f} x)")
        assert shared_s <= 1.5 * own_s, page


def test_shared_comparison_and_sweep_pages_load_within_1_5_x_the_owners(
    make_transcript, alice_client, user
):
    """The same target for a comparison's and a sweep's link (tool-heavy session: A against an
    early-compacting B, and a three-value sweep)."""
    from contextlab.runs.models import Run
    from contextlab.sharing import targets
    from contextlab.tuning import configs as tuning_configs
    from contextlab.tuning import services as tuning

    transcript = make_transcript(corpus_path("marot__spotter__tool_heavy.jsonl"))
    comparison = tuning.create_comparison(
        owner=user,
        transcripts=[transcript],
        a=tuning_configs.ConfigSpec(),
        b=tuning_configs.ConfigSpec(overrides={"autocompact_pct_override": 10}),
    )
    sweep = tuning.create_sweep(
        owner=user,
        transcripts=[transcript],
        base=tuning_configs.ConfigSpec(),
        field_name="autocompact_pct_override",
        values=[10, 50, 90],
    )
    for pk in Run.objects.filter(status=Run.Status.QUEUED).values_list("pk", flat=True):
        runner.execute_run(pk)
    anonymous = Client()
    for target in (comparison, sweep):
        _, token = targets.create_share(user=user, target=target)
        own, shared = target.get_absolute_url(), f"/s/{token}/"
        own_s, shared_s = best_of(
            [lambda own=own: alice_client.get(own), lambda shared=shared: anonymous.get(shared)]
        )
        print(f"{target}: owner {own_s:.3f} s, shared {shared_s:.3f} s ({shared_s / own_s:.2f} x)")
        assert shared_s <= 1.5 * own_s, str(target)
