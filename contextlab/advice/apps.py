from django.apps import AppConfig


class AdviceConfig(AppConfig):
    name = "contextlab.advice"
    verbose_name = "Advice"
