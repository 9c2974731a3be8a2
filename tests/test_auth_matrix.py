"""Every page and API route, found by walking the URL conf and the OpenAPI schema, refuses
anonymous visitors: pages redirect to the login page, API routes answer 401."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.django_db

PUBLIC = {"accounts:login", "accounts:signup", "accounts:logout"}


def page_routes() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []

    def walk(patterns, prefix: str, namespace: str | None) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                if p.namespace in ("admin", "api"):
                    continue
                walk(p.url_patterns, prefix + str(p.pattern), p.namespace or namespace)
            elif isinstance(p, URLPattern) and p.name and namespace:
                name = f"{namespace}:{p.name}"
                if name not in PUBLIC:
                    # fill every converter with 1 (ids) or "main" (thread names)
                    path = re.sub(r"<int:\w+>", "1", prefix + str(p.pattern))
                    path = re.sub(r"<(str:)?\w+>", "main", path)
                    out.append((name, "/" + path))

    walk(get_resolver().url_patterns, "", None)
    return out


def test_there_are_routes_to_check():
    names = {name for name, _ in page_routes()}
    assert {"transcripts:list", "runs:report", "runs:request", "runs:detail"} <= names


@pytest.mark.parametrize("method", ["get", "post"])
def test_every_page_redirects_anonymous_visitors_to_login(client, method):
    for name, path in page_routes():
        response = getattr(client, method)(path)
        assert response.status_code in (302, 405), f"{name} {path}: {response.status_code}"
        if response.status_code == 302:
            assert response["Location"].startswith("/accounts/login/"), f"{name} {path}"


def test_every_api_operation_answers_401_without_a_token(client):
    schema = client.get("/api/openapi.json").json()
    checked = 0
    for path, operations in schema["paths"].items():
        url = re.sub(r"\{\w+\}", "1", path)
        for method in operations:
            response = getattr(client, method)(url)
            assert response.status_code == 401, f"{method.upper()} {path}: {response.status_code}"
            checked += 1
    assert checked >= 7
