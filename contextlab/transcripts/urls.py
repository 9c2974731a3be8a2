from django.urls import path

from contextlab.transcripts import views

app_name = "transcripts"

urlpatterns = [
    path("", views.session_list, name="list"),
    path("upload/", views.upload, name="upload"),
    path("demo/", views.load_demo, name="demo"),
    path("<int:pk>/delete/", views.delete, name="delete"),
    path("<int:pk>/rename/", views.rename, name="rename"),
]

#: mounted under /workspaces/ (where the page has always been): moving a session is the
#: session's own action, so its view is this app's
moving = (
    [path("sessions/<int:pk>/move/", views.move_session, name="move_session")],
    "moving",
)
