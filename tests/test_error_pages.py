"""Error pages with DEBUG off: friendly HTML for people, JSON under /api/, never a traceback."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseGone
from django.test import Client
from django.urls import include, path

from contextlab import urls as project_urls

pytestmark = pytest.mark.django_db


def _forbidden(request: HttpRequest) -> HttpResponse:
    raise PermissionDenied("internal reason that must not be shown")


def _gone(request: HttpRequest) -> HttpResponse:
    return HttpResponseGone()


def _boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("secret internal detail in a traceback")


# this module is also the URLconf of the tests below: the project's URLs plus failing views
urlpatterns = [
    path("test-errors/forbidden/", _forbidden),
    path("test-errors/gone/", _gone),
    path("test-errors/boom/", _boom),
    path("api/test-errors/boom/", _boom),
    path("", include(project_urls.urlpatterns)),
]
handler400 = project_urls.handler400
handler403 = project_urls.handler403
handler404 = project_urls.handler404
handler500 = project_urls.handler500


def _assert_friendly(response: HttpResponse, status: int, title: str) -> str:
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert 'id="error-page"' in html
    assert title in html
    assert "Traceback" not in html
    assert "technical_500" not in html
    assert "DEBUG = True" not in html
    assert "Content-Security-Policy" in response.headers
    return html


def test_a_wrong_link_of_a_logged_in_user_is_a_friendly_404(alice_client, settings):
    assert settings.DEBUG is False
    html = _assert_friendly(alice_client.get("/sessions/987654/"), 404, "Not found")
    assert "Your sessions" in html  # the nav and a way back
    assert 'class="topbar"' in html


def test_an_unknown_url_is_a_friendly_404_for_anyone(client):
    html = _assert_friendly(client.get("/no/such/page/"), 404, "Not found")
    assert "Log in" in html


@pytest.mark.urls(__name__)
def test_permission_denied_is_a_friendly_403(alice_client):
    html = _assert_friendly(alice_client.get("/test-errors/forbidden/"), 403, "Not allowed")
    assert "internal reason" not in html


def test_an_expired_form_is_a_friendly_403(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    html = _assert_friendly(client.post("/accounts/logout/"), 403, "Not allowed")
    assert "Reload the page" in html


@pytest.mark.urls(__name__)
def test_a_bare_gone_response_gets_the_friendly_410(alice_client):
    _assert_friendly(alice_client.get("/test-errors/gone/"), 410, "Gone")


@pytest.mark.urls(__name__)
def test_a_server_error_is_the_friendly_500_without_details(alice_client):
    alice_client.raise_request_exception = False
    html = _assert_friendly(alice_client.get("/test-errors/boom/"), 500, "Something went wrong")
    assert "secret internal detail" not in html


def test_a_bad_host_is_a_friendly_400(client):
    response = client.get("/accounts/login/", HTTP_HOST="evil.example.com")
    _assert_friendly(response, 400, "Bad request")


def test_the_api_answers_json_404s(client, auth_header):
    unknown_route = client.get("/api/no-such-thing", **auth_header)
    assert unknown_route.status_code == 404
    assert unknown_route["Content-Type"].startswith("application/json")
    assert json.loads(unknown_route.content) == {"detail": "Not Found"}
    unknown_run = client.get("/api/runs/987654", **auth_header)
    assert unknown_run.status_code == 404
    assert unknown_run["Content-Type"].startswith("application/json")
    assert "detail" in json.loads(unknown_run.content)


@pytest.mark.urls(__name__)
def test_an_api_server_error_is_json_without_a_traceback(client):
    client.raise_request_exception = False
    response = client.get("/api/test-errors/boom/")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("application/json")
    assert json.loads(response.content) == {"detail": "Something went wrong on our side"}


def test_an_api_exception_inside_ninja_is_json_too(client, auth_header, monkeypatch):
    from contextlab.runs import api as runs_api

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internal detail")

    # the run's lookup (the ownership gate) fails inside the ninja view
    monkeypatch.setattr(runs_api.access, "run_for", broken)
    client.raise_request_exception = False
    response = client.get("/api/runs/1", **auth_header)
    assert response.status_code == 500
    assert response["Content-Type"].startswith("application/json")
    assert b"secret internal detail" not in response.content
