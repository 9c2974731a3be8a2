from django.contrib import admin

from contextlab.transcripts.models import Transcript


@admin.register(Transcript)
class TranscriptAdmin(admin.ModelAdmin[Transcript]):
    list_display = ("name", "owner", "request_count", "version", "created_at")
    search_fields = ("name", "sha256", "session_id")
    readonly_fields = ("sha256", "file", "size")
