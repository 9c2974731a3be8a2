from django.urls import path

from contextlab.runs import views

app_name = "runs"

urlpatterns = [
    path("sessions/<int:pk>/", views.report, name="report"),
    path("sessions/<int:pk>/runs/", views.create_run, name="create"),
    path("sessions/<int:pk>/requests/<int:index>/", views.explorer, name="request"),
    path("sessions/<int:pk>/compare-requests/", views.compare_requests, name="compare_requests"),
    path(
        "sessions/<int:pk>/messages/<str:thread>/<int:message>/<int:block>/",
        views.block_text,
        name="block",
    ),
    path("runs/<int:pk>/", views.run_detail, name="detail"),
    path("runs/<int:pk>/requests.csv", views.run_requests_csv, name="requests_csv"),
    path("runs/<int:pk>/tools.csv", views.run_tools_csv, name="tools_csv"),
    path("runs/<int:pk>/cancel/", views.cancel_run, name="cancel"),
    path("runs/<int:pk>/replay-in-full/", views.replay_in_full, name="replay_in_full"),
    path("glossary/", views.glossary, name="glossary"),
]
