from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "contextlab.runs"
    label = "runs"
