from django.contrib import admin

from contextlab.runs.models import Run


@admin.register(Run)
class RunAdmin(admin.ModelAdmin[Run]):
    list_display = (
        "pk",
        "transcript",
        "owner",
        "mode",
        "preset",
        "status",
        "attempts",
        "created_at",
    )
    list_filter = ("status", "mode")
