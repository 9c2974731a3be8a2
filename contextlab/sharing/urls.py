from django.urls import path

from contextlab.sharing import pages, views

app_name = "sharing"

urlpatterns = [
    path("sessions/<int:pk>/share/", views.share_dialog, name="dialog"),
    path("compare/<int:pk>/share/", pages.comparison_dialog, name="comparison_dialog"),
    path("sweeps/<int:pk>/share/", pages.sweep_dialog, name="sweep_dialog"),
    path("sessions/<int:pk>/export.html", views.export_html, name="export_html"),
    path("shares/", views.link_list, name="links"),
    path("shares/<int:pk>/revoke/", views.revoke, name="revoke"),
    path("s/<str:token>/", views.shared_report, name="shared"),
    path("s/<str:token>/requests/<int:index>/", views.shared_explorer, name="shared_request"),
    path(
        "s/<str:token>/messages/<str:thread>/<int:message>/<int:block>/",
        views.shared_block,
        name="shared_block",
    ),
]
