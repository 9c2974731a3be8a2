from django.contrib.auth import views as auth_views
from django.urls import path

from contextlab.accounts import throttle, views

app_name = "accounts"

urlpatterns = [
    path("signup/", throttle.signup, name="signup"),
    path("login/", throttle.login, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.revoke_token, name="revoke_token"),
]
