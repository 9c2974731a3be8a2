from django.apps import AppConfig


class SharingConfig(AppConfig):
    name = "contextlab.sharing"
    label = "sharing"
