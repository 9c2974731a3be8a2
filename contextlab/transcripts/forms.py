"""The sessions pages' forms that name a workspace: the upload's and the move's."""

from __future__ import annotations

from django import forms


class UploadForm(forms.Form):
    """The upload's other fields (the files stream in through the upload handlers): the
    workspace, blank for the personal one."""

    workspace = forms.IntegerField(required=False, min_value=1)


class MoveForm(forms.Form):
    workspace_id = forms.IntegerField(required=False, min_value=1)
