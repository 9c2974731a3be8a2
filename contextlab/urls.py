"""Top-level URLs: pages per app plus the JSON API under /api/."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from contextlab.api import api

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="transcripts:list", permanent=False)),
    path("accounts/", include("contextlab.accounts.urls")),
    path("sessions/", include("contextlab.transcripts.urls")),
    path("", include("contextlab.runs.urls")),
    path("", include("contextlab.tuning.urls")),
    path("api/", api.urls),
    path("admin/", admin.site.urls),
]
