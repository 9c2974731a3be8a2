from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "contextlab.workspaces"
    label = "workspaces"

    def ready(self) -> None:
        from contextlab.workspaces import signals  # noqa: F401  (connects the receivers)
