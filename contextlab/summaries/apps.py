from django.apps import AppConfig


class SummariesConfig(AppConfig):
    name = "contextlab.summaries"
    label = "summaries"
    verbose_name = "LLM summaries"
