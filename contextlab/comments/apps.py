from django.apps import AppConfig


class CommentsConfig(AppConfig):
    name = "contextlab.comments"
    label = "comments"
