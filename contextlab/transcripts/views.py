"""Pages for sessions: the dashboard with the upload zone, the upload endpoint, delete."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import UploadedFile
from django.db.models import Prefetch
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from contextlab.http import AuthedRequest
from contextlab.runs.models import Run
from contextlab.transcripts import moving, services
from contextlab.transcripts.forms import MoveForm, UploadForm
from contextlab.transcripts.models import Transcript
from contextlab.transcripts.uploads import INCOMPLETE_KEY, OVERSIZE_KEY
from contextlab.workspaces import access
from contextlab.workspaces.models import Workspace


@login_required
def session_list(request: AuthedRequest) -> HttpResponse:
    transcripts = (
        access.sessions(request.user)
        .select_related("workspace")
        .prefetch_related(Prefetch("runs", queryset=Run.objects.order_by("-created_at")))
    )
    return render(
        request,
        "transcripts/session_list.html",
        {
            "transcripts": transcripts,
            # the personal workspace first: it is the default
            "upload_workspaces": sorted(
                access.workspaces(request.user, access.WRITE),
                key=lambda w: (not w.is_personal, w.name),
            ),
        },
    )


def upload_workspace(request: AuthedRequest) -> Workspace | None:
    """The workspace the upload form names (``workspace``), checked by the gate; None (the
    personal workspace) when the form names none."""
    form = UploadForm(request.POST)
    if not form.is_valid():
        raise Http404("no such workspace")
    workspace_id = form.cleaned_data["workspace"]
    if workspace_id is None:
        return None
    return access.workspace_for(request.user, workspace_id, access.WRITE)


def _upload_one(
    request: AuthedRequest, upload: UploadedFile[bytes], workspace: Workspace | None
) -> tuple[int, dict[str, Any]]:
    try:
        transcript, stored = services.store_upload(
            owner=request.user,
            name=upload.name or "",
            content=upload.chunks(),
            workspace=workspace,
        )
    except services.UploadRejected as exc:
        return exc.status, {
            "name": upload.name,
            "ok": False,
            "message": exc.message,
            "problems": exc.problems[:20],
        }
    run = transcript.runs.first()
    created = stored is services.Stored.CREATED
    if stored is services.Stored.GREW:
        message = f"{upload.name} continues “{transcript.display_name}”: the session was updated and is replayed again"
    elif not created:
        message = f"{upload.name} was already uploaded as “{transcript.display_name}”; showing that session."
    else:
        message = f"{upload.name}: {transcript.request_count} requests" + (
            f", {len(transcript.problems)} problem(s) reported" if transcript.problems else ""
        )
    return (201 if created else 200), {
        "name": upload.name,
        "ok": True,
        "duplicate": stored is services.Stored.DUPLICATE,
        "grew": stored is services.Stored.GREW,
        "id": transcript.pk,
        "url": transcript.get_absolute_url(),
        "run_url": run.get_absolute_url() if run else None,
        "requests": transcript.request_count,
        "problems": len(transcript.problems),
        "message": message,
    }


@login_required
@require_POST
def upload(request: AuthedRequest) -> HttpResponse:
    """Store one or many uploaded files. Answers JSON to the page's XHR, else redirects."""
    wants_json = "application/json" in request.headers.get("Accept", "")
    results: list[dict[str, Any]] = []
    status = 200
    files = request.FILES.getlist("file")  # parses the body; the size handler runs here
    try:
        workspace = upload_workspace(request)
    except (Http404, PermissionDenied) as exc:
        if not wants_json:
            raise
        code = 403 if isinstance(exc, PermissionDenied) else 404
        message = "You cannot upload to that workspace." if code == 403 else "No such workspace."
        return JsonResponse(
            {"results": [{"name": "", "ok": False, "message": message}]}, status=code
        )
    for name in request.META.get(OVERSIZE_KEY, []):
        results.append({"name": name, "ok": False, "message": services.too_large_message(name)})
        status = 413
    for name in request.META.get(INCOMPLETE_KEY, []):
        results.append({"name": name, "ok": False, "message": services.interrupted_message(name)})
        status = max(status, 400)
    if not files and not results:
        results.append({"name": "", "ok": False, "message": "Choose at least one transcript file."})
        status = 400
    for upload_file in files:
        code, result = _upload_one(request, upload_file, workspace)
        results.append(result)
        if code >= 400:
            status = max(status, code)
        elif status < 400:
            status = code
    if wants_json:
        return JsonResponse({"results": results}, status=status)
    for result in results:
        (messages.success if result["ok"] else messages.error)(request, result["message"])
    ok = [r for r in results if r["ok"]]
    if len(results) == 1 and ok:
        return redirect(ok[0]["url"])
    return redirect("transcripts:list")


@access.session_view(access.WRITE)
@require_POST
def rename(request: AuthedRequest, transcript: Transcript) -> HttpResponse:
    """Give the session a title of the team's own (empty: back to the transcript's own)."""
    try:
        services.rename_transcript(transcript=transcript, title=request.POST.get("title", ""))
    except services.UploadRejected as exc:
        return HttpResponse(exc.message, status=422, content_type="text/plain; charset=utf-8")
    if request.htmx:
        return render(request, "transcripts/_title.html", {"transcript": transcript})
    return redirect(transcript.get_absolute_url())


@login_required
@require_POST
def load_demo(request: AuthedRequest) -> HttpResponse:
    """Put the bundled demo session in the user's personal workspace and open it."""
    try:
        transcript = services.load_demo_session(request.user)
    except services.UploadRejected as exc:
        messages.error(request, f"The demo session could not be loaded: {exc}")
        return redirect("transcripts:list")
    messages.success(
        request, f"The demo session “{transcript.display_name}” is in your personal workspace."
    )
    return redirect(transcript.get_absolute_url())


@access.session_view(access.MANAGE)
@require_POST
def delete(request: AuthedRequest, transcript: Transcript) -> HttpResponse:
    name = transcript.display_name
    services.delete_transcript(transcript=transcript)
    messages.success(request, f"Deleted {name}.")
    if request.htmx:
        return HttpResponseClientRedirect(reverse("transcripts:list"), status=204)
    return redirect("transcripts:list")


@access.session_view(access.WRITE)
def move_session(request: AuthedRequest, transcript: Transcript) -> HttpResponse:
    """GET: where the session can go and what moving does; POST: move it."""
    context = {
        "transcript": transcript,
        "targets": moving.move_targets(request.user, transcript),
        "live_links": transcript.share_links.filter(revoked_at__isnull=True).count(),
    }
    if request.method == "POST":
        form = MoveForm(request.POST)
        try:
            revoked = moving.move_session(
                user=request.user,
                transcript=transcript,
                # not a workspace id: no such workspace
                workspace_id=form.cleaned_data["workspace_id"] or 0 if form.is_valid() else 0,
            )
        except moving.MoveRefused as exc:
            context["error"] = exc.message
            return render(request, "workspaces/move.html", context, status=422)
        messages.success(
            request,
            f"Moved {transcript.display_name} and its runs to “{transcript.workspace.name}”"
            + (f"; revoked {revoked} share link{'s' if revoked != 1 else ''}." if revoked else "."),
        )
        return redirect(transcript)
    return render(request, "workspaces/move.html", context)
