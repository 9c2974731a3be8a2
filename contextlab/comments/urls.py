from django.urls import path

from contextlab.comments import views

app_name = "comments"

urlpatterns = [
    path("sessions/<int:pk>/requests/<int:index>/comments/", views.create, name="create"),
    path("comments/<int:pk>/edit/", views.edit, name="edit"),
    path("comments/<int:pk>/delete/", views.delete, name="delete"),
]
