from django.urls import path

from contextlab.tuning.views import common, comparisons, configs, sweeps

app_name = "tuning"

urlpatterns = [
    path("tune/", common.index, name="index"),
    path("configs/new/", configs.config_new, name="config_new"),
    path("configs/check/", configs.config_check, name="config_check"),
    path("configs/<int:pk>/", configs.config_detail, name="config"),
    path("configs/<int:pk>/delete/", common.config_delete, name="config_delete"),
    path("compare/new/", comparisons.compare_new, name="compare_new"),
    path("compare/<int:pk>/", comparisons.comparison_detail, name="comparison"),
    path("compare/<int:pk>/delete/", common.comparison_delete, name="comparison_delete"),
    path("compare/<int:pk>/cancel/", common.comparison_cancel, name="comparison_cancel"),
    path(
        "compare/<int:pk>/requests/<int:index>/",
        comparisons.compare_request,
        name="compare_request",
    ),
    path("sweeps/new/", sweeps.sweep_new, name="sweep_new"),
    path("sweeps/<int:pk>/", sweeps.sweep_detail, name="sweep"),
    path("sweeps/<int:pk>/delete/", common.sweep_delete, name="sweep_delete"),
    path("sweeps/<int:pk>/cancel/", common.sweep_cancel, name="sweep_cancel"),
]
