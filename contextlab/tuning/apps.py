from django.apps import AppConfig


class TuningConfig(AppConfig):
    name = "contextlab.tuning"
    verbose_name = "Tuning"
