from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "contextlab.search"
    label = "search"
