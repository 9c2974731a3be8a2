from django.urls import path

from contextlab.workspaces import views

app_name = "workspaces"

urlpatterns = [
    path("", views.workspace_list, name="list"),
    path("new/", views.workspace_create, name="create"),
    path("<int:pk>/members/", views.member_set, name="member_set"),
    path("<int:pk>/members/remove/", views.member_remove, name="member_remove"),
    path("<int:pk>/invites/", views.invite_create, name="invite_create"),
    path("invite/<str:token>/", views.invite, name="invite"),
]
