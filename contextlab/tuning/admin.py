from django.contrib import admin

from contextlab.tuning.models import Comparison, ConfigVersion, SavedConfig, Sweep


@admin.register(SavedConfig)
class SavedConfigAdmin(admin.ModelAdmin[SavedConfig]):
    list_display = ("pk", "name", "owner", "base_preset", "updated_at")


@admin.register(ConfigVersion)
class ConfigVersionAdmin(admin.ModelAdmin[ConfigVersion]):
    list_display = ("pk", "saved_config", "number", "base_preset", "created_at")


@admin.register(Comparison)
class ComparisonAdmin(admin.ModelAdmin[Comparison]):
    list_display = ("pk", "owner", "a_preset", "b_preset", "created_at")


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin[Sweep]):
    list_display = ("pk", "owner", "field", "base_preset", "created_at")
