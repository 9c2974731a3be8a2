"""Pages for saved configs: the editor (every field validated inline) and its check."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from contextlab import engine
from contextlab.http import AuthedRequest
from contextlab.tuning import configs as tuning_configs
from contextlab.tuning import services
from contextlab.tuning.forms import ConfigForm
from contextlab.tuning.models import SavedConfig
from contextlab.tuning.views.common import (
    _role_allows,
    _workspace_choices,
    _workspace_from_form,
)
from contextlab.workspaces import access

# --- configs -----------------------------------------------------------------------------------


def _field_rows(check: tuning_configs.FormCheck, values: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per config field for the editor: its input, range, doc and error."""
    base = (
        tuning_configs.preset_base(check.preset).to_dict()
        if check.preset in engine.PRESET_NAMES
        else {}
    )
    rows = []
    for spec in engine.field_specs():
        name, kind = spec["name"], str(spec["type"])
        if kind == "bool":
            widget = "checkbox"
        elif spec.get("choices"):
            widget = "select"
        elif kind.startswith(("int", "float")):
            widget = "number"
        else:
            widget = "text"
        rows.append(
            {
                **spec,
                "widget": widget,
                "value": values.get(name, tuning_configs.form_value(base.get(name))),
                "checked": tuning_configs.parse_field(spec, values.get(name))
                if kind == "bool" and name in values
                else bool(base.get(name)),
                "preset_value": json.dumps(base.get(name))
                if not isinstance(base.get(name), str)
                else base.get(name),
                "changed": name in check.overrides,
                "error": check.errors.get(name),
                "step": "1" if kind.startswith("int") else "any",
            }
        )
    return rows


def _groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row)
    return [
        {"name": name, "rows": items, "changed": sum(1 for r in items if r["changed"])}
        for name, items in groups.items()
    ]


def _config_context(
    request: AuthedRequest,
    *,
    saved: SavedConfig | None,
    preset: str,
    values: dict[str, str],
    name: str,
    name_error: str | None = None,
    refused: dict[str, str] | None = None,
) -> dict[str, Any]:
    check = tuning_configs.check_form(preset, values)
    check.errors.update(refused or {})
    rows = _field_rows(check, values)
    versions = list(saved.versions.all()) if saved else []
    return {
        "saved": saved,
        "workspaces": _workspace_choices(request) if saved is None else [],
        "workspace_id": request.POST.get("workspace_id", ""),
        "can_edit": saved is None or _role_allows(saved, access.WRITE),
        "can_delete": saved is not None and _role_allows(saved, access.MANAGE),
        "versions": versions,
        "name": name,
        "name_error": name_error,
        "preset": check.preset,
        "presets": [
            {"name": p, "description": engine.PRESET_DESCRIPTIONS.get(p, "")}
            for p in engine.PRESET_NAMES
        ],
        "check": check,
        "groups": _groups(rows),
        "error_fields": [(field, message) for field, message in check.errors.items()],
    }


def _values_of(preset: str, overrides: dict[str, Any]) -> dict[str, str]:
    """Form values of a stored config: the preset's values with the overrides on top."""
    try:
        config = tuning_configs.validate_config(preset, overrides)
    except engine.FieldError:
        config = tuning_configs.preset_base("auto")
    data = config.to_dict()
    return {
        spec["name"]: tuning_configs.form_value(data.get(spec["name"]))
        for spec in engine.field_specs()
    }


@login_required
def config_new(request: AuthedRequest) -> HttpResponse:
    return _config_page(request, None)


@login_required
def config_detail(request: AuthedRequest, pk: int) -> HttpResponse:
    """A saved config: members read it, editors save a new version."""
    need = access.WRITE if request.method == "POST" else access.READ
    saved = access.item_for(request.user, SavedConfig.objects.all(), pk, need)
    return _config_page(request, saved)


def _config_page(request: AuthedRequest, saved: SavedConfig | None) -> HttpResponse:
    if request.method == "POST":
        form = ConfigForm(request.POST)
        values = form.setting_values()
        preset = form.cleaned_data.get("preset", "auto")
        name = form.cleaned_data.get("name", "")
        refused = form.refused()
        name_error = form.name_error()
        check = tuning_configs.check_form(preset, values)
        check.errors.update(refused)
        if not check.errors and name_error is None:
            try:
                version = services.save_config(
                    owner=request.user,
                    name=name,
                    preset=check.preset,
                    overrides=check.overrides,
                    saved=saved,
                    workspace=_workspace_from_form(request) if saved is None else None,
                )
            except engine.FieldError as exc:
                if exc.field in ("name", "workspace_id"):
                    name_error = exc.message
                else:
                    check.errors[exc.field.removeprefix("config.")] = exc.message
            else:
                return redirect(
                    version.saved_config.get_absolute_url() + f"?saved={version.number}"
                )
        context = _config_context(
            request,
            saved=saved,
            preset=preset,
            values=values,
            name=name,
            name_error=name_error,
            refused=refused,
        )
        return render(request, "tuning/config_form.html", context, status=422)
    if saved is not None:
        latest = saved.latest
        preset = latest.base_preset if latest else saved.base_preset
        overrides = latest.overrides if latest else {}
        name = saved.name
    else:
        preset = request.GET.get("preset", "auto")
        if preset not in engine.PRESET_NAMES:
            preset = "auto"
        overrides = {}
        name = ""
    context = _config_context(
        request, saved=saved, preset=preset, values=_values_of(preset, overrides), name=name
    )
    context["just_saved"] = request.GET.get("saved")
    return render(request, "tuning/config_form.html", context)


@login_required
@require_POST
def config_check(request: AuthedRequest) -> HttpResponse:
    """Inline validation: the ``config-check`` partial (errors by field, diff from the preset)."""
    form = ConfigForm(request.POST)
    values = form.setting_values()
    preset = form.cleaned_data.get("preset", "auto")
    if request.POST.get("reset") == "1":
        values = _values_of(preset, {})
        context = _config_context(request, saved=None, preset=preset, values=values, name="")
        return render(request, "tuning/config_form.html#config-fields", context)
    context = _config_context(
        request, saved=None, preset=preset, values=values, name="", refused=form.refused()
    )
    html = render_to_string("tuning/config_form.html#config-check", context, request)
    # each field's own error span is refreshed out of band, next to its input
    html += render_to_string("tuning/config_form.html#config-errors", context, request)
    return HttpResponse(html)
