"""The ownership gate: the one place that decides who may read or change a session and its runs.

Every page, htmx partial, chart, block-text fragment, API route and export finds its session
(or run) through ``sessions()``/``session_for()``/``runs()``/``run_for()``, or through the
``session_view``/``run_view`` decorators built on them. Access is read from the memberships on
every request, so removing a member ends their access with the next request.

Answers: not a member (or no such object) → 404, so ids do not leak; a member whose role is too
low → 403.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import F, Model, QuerySet
from django.http import Http404, HttpResponse

from contextlab.http import AuthedRequest
from contextlab.runs.models import Run
from contextlab.transcripts.models import Transcript
from contextlab.workspaces.models import Membership, Role, Workspace, roles_at_least

#: what each kind of action needs
READ = Role.VIEWER
WRITE = Role.EDITOR  # upload, run, compare, share
MANAGE = Role.OWNER  # members, delete


def workspaces(user: User, need: Role = READ) -> QuerySet[Workspace]:
    """The workspaces where ``user`` has at least the role ``need``."""
    return Workspace.objects.filter(
        memberships__user=user, memberships__role__in=roles_at_least(need)
    )


def role_in(user: User, workspace_id: int) -> Role | None:
    """The user's role in a workspace, None when not a member."""
    role = (
        Membership.objects.filter(workspace_id=workspace_id, user=user)
        .values_list("role", flat=True)
        .first()
    )
    return Role(role) if role is not None else None


def workspace_for(user: User, pk: int, need: Role = READ) -> Workspace:
    workspace = Workspace.objects.filter(pk=pk, memberships__user=user).first()
    if workspace is None:
        raise Http404("no such workspace")
    _require(role_in(user, workspace.pk), need)
    return workspace


def _require(role: Role | None, need: Role) -> Role:
    if role is None:
        raise Http404("not found")
    if not role.allows(need):
        raise PermissionDenied(f"this needs the {need} role in the workspace (you are {role})")
    return role


def sessions(user: User, need: Role = READ) -> QuerySet[Transcript]:
    """The sessions ``user`` may act on with role ``need``; each has ``member_role`` set."""
    return Transcript.objects.filter(
        workspace__memberships__user=user,
        workspace__memberships__role__in=roles_at_least(need),
    ).annotate(member_role=F("workspace__memberships__role"))


def session_for(user: User, pk: int, need: Role = READ) -> Transcript:
    """One session, if ``user`` may do ``need`` on it (404 when not visible, 403 when the role is
    too low). The result carries ``member_role``."""
    transcript = sessions(user, READ).select_related("workspace").filter(pk=pk).first()
    if transcript is None:
        raise Http404("no such session")
    _require(member_role(transcript), need)
    return transcript


def runs(user: User, need: Role = READ) -> QuerySet[Run]:
    return Run.objects.filter(
        transcript__workspace__memberships__user=user,
        transcript__workspace__memberships__role__in=roles_at_least(need),
    ).annotate(member_role=F("transcript__workspace__memberships__role"))


def run_for(user: User, pk: int, need: Role = READ) -> Run:
    run = runs(user, READ).select_related("transcript").filter(pk=pk).first()
    if run is None:
        raise Http404("no such run")
    _require(member_role(run), need)
    return run


Item = TypeVar("Item", bound=Model)


def items(user: User, queryset: QuerySet[Item], need: Role = READ) -> QuerySet[Item]:
    """The rows of ``queryset`` (a model with a ``workspace`` foreign key: a saved config, a
    comparison, a sweep) in workspaces where ``user`` has at least ``need``; each has
    ``member_role`` set."""
    filtered = queryset.filter(
        workspace__memberships__user=user,
        workspace__memberships__role__in=roles_at_least(need),
    ).annotate(member_role=F("workspace__memberships__role"))
    return cast(QuerySet[Item], filtered)


def item_for(user: User, queryset: QuerySet[Item], pk: int, need: Role = READ) -> Item:
    """One row of a workspace-owned model, if ``user`` may do ``need`` on it (404 when not a
    member, 403 when the role is too low), with ``member_role`` set."""
    item = items(user, queryset, READ).filter(pk=pk).first()
    if item is None:
        raise Http404(f"no such {queryset.model._meta.verbose_name}")
    _require(member_role(item), need)
    return item


def member_role(item: Any) -> Role | None:
    """The role the gate's query annotated on a session, run or workspace item (None on other
    instances)."""
    role = getattr(item, "member_role", None)
    return Role(role) if role is not None else None


View = Callable[..., HttpResponse]


def session_view(need: Role) -> Callable[[View], View]:
    """Decorate a page ``view(request, transcript, **url_kwargs)`` routed with ``<int:pk>``:
    login required, then the session through the gate in place of ``pk``."""

    def decorate(view: View) -> View:
        @login_required
        @wraps(view)
        def wrapper(request: AuthedRequest, *args: Any, pk: int, **kwargs: Any) -> HttpResponse:
            transcript = session_for(request.user, pk, need)
            return view(request, transcript, *args, **kwargs)

        return cast(View, wrapper)

    return decorate


def run_view(need: Role) -> Callable[[View], View]:
    """As ``session_view``, for pages routed with a run's ``<int:pk>``."""

    def decorate(view: View) -> View:
        @login_required
        @wraps(view)
        def wrapper(request: AuthedRequest, *args: Any, pk: int, **kwargs: Any) -> HttpResponse:
            run = run_for(request.user, pk, need)
            return view(request, run, *args, **kwargs)

        return cast(View, wrapper)

    return decorate
