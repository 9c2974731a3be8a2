from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "contextlab.search"
    label = "search"

    def ready(self) -> None:
        from contextlab.search import signals  # noqa: F401  (connects the receivers)
