from django.urls import path

from contextlab.advice import views

app_name = "advice"

urlpatterns = [
    path("advice/", views.advice_list, name="list"),
    path("advice/new/", views.advice_new, name="new"),
    path("advice/<int:pk>/", views.advice_detail, name="detail"),
    path("advice/<int:pk>/cancel/", views.advice_cancel, name="cancel"),
    path("advice/<int:pk>/delete/", views.advice_delete, name="delete"),
]
