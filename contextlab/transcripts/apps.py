from django.apps import AppConfig


class TranscriptsConfig(AppConfig):
    name = "contextlab.transcripts"
    label = "transcripts"
    verbose_name = "sessions"
