from django.urls import path

from contextlab.search import views

app_name = "search"

urlpatterns = [
    path("search/", views.workspace_search, name="workspace"),
    path("sessions/<int:pk>/search/", views.session_search, name="session"),
]
