from django.urls import path

from contextlab.transcripts import views

app_name = "transcripts"

urlpatterns = [
    path("", views.session_list, name="list"),
    path("upload/", views.upload, name="upload"),
    path("<int:pk>/delete/", views.delete, name="delete"),
    path("<int:pk>/rename/", views.rename, name="rename"),
]
