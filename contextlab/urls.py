"""Top-level URLs: pages per app plus the JSON API under /api/.

``/healthz`` is answered by ``contextlab.health.HealthCheckMiddleware`` before URL routing; the
route below is the same view, for the URL map's sake. Error pages: ``contextlab.errors``.
"""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from contextlab import health
from contextlab.api import api
from contextlab.transcripts.urls import moving

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="transcripts:list", permanent=False)),
    path("healthz", health.healthz, name="healthz"),
    path("accounts/", include("contextlab.accounts.urls")),
    path("sessions/", include("contextlab.transcripts.urls")),
    path("workspaces/", include("contextlab.workspaces.urls")),
    path("workspaces/", include(moving)),
    path("", include("contextlab.sharing.urls")),
    path("", include("contextlab.comments.urls")),
    path("", include("contextlab.runs.urls")),
    path("", include("contextlab.tuning.urls")),
    path("", include("contextlab.advice.urls")),
    path("", include("contextlab.search.urls")),
    path("api/", api.urls),
    path("admin/", admin.site.urls),
]

handler400 = "contextlab.errors.bad_request"
handler403 = "contextlab.errors.permission_denied"
handler404 = "contextlab.errors.page_not_found"
handler500 = "contextlab.errors.server_error"
