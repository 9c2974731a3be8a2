"""Config: every threshold and switch of the pipeline, declared once, and what reads them.

``fields`` declares ``PipelineConfig`` (the field table: type, range, documentation, source);
``schema`` reads those declarations as msgspec does and words what is wrong with a value
(``errors.FieldError``); ``files`` reads settings files, ``forms`` the values a form or the API
sends; ``presets`` holds the named starting points (``data/presets.toml``) and which Claude Code
version each matches, ``resolve`` turns a preset plus overrides into a config, and
``thresholds`` does Claude Code's threshold arithmetic for one config and model.
"""
