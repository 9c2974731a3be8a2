from django.contrib import admin

from contextlab.accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    list_display = ("prefix", "user", "name", "created_at", "last_used_at")
    readonly_fields = ("key_hash", "prefix", "created_at", "last_used_at")
