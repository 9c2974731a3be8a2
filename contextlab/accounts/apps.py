from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "contextlab.accounts"
    label = "accounts"
