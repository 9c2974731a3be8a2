from django.urls import path

from contextlab.tuning import views

app_name = "tuning"

urlpatterns = [
    path("tune/", views.index, name="index"),
    path("configs/new/", views.config_new, name="config_new"),
    path("configs/check/", views.config_check, name="config_check"),
    path("configs/<int:pk>/", views.config_detail, name="config"),
    path("configs/<int:pk>/delete/", views.config_delete, name="config_delete"),
    path("compare/new/", views.compare_new, name="compare_new"),
    path("compare/<int:pk>/", views.comparison_detail, name="comparison"),
    path("compare/<int:pk>/delete/", views.comparison_delete, name="comparison_delete"),
    path("compare/<int:pk>/cancel/", views.comparison_cancel, name="comparison_cancel"),
    path("compare/<int:pk>/requests/<int:index>/", views.compare_request, name="compare_request"),
    path("sweeps/new/", views.sweep_new, name="sweep_new"),
    path("sweeps/<int:pk>/", views.sweep_detail, name="sweep"),
    path("sweeps/<int:pk>/delete/", views.sweep_delete, name="sweep_delete"),
    path("sweeps/<int:pk>/cancel/", views.sweep_cancel, name="sweep_cancel"),
]
