"""``FieldError``: the one error type for "this input is wrong", from the engine up to the forms and
the API."""

from __future__ import annotations


class FieldError(ValueError):
    """An input is wrong: unknown, of the wrong type, out of range or inconsistent with another.

    The one error type for "this field is wrong", from the engine up to the forms and the API.
    ``field`` names the input (a form attaches the message to it; the API puts it in
    ``detail[].loc``); ``str()`` reads ``"<field>: <message>"``.
    """

    def __init__(self, field: str, message: str) -> None:
        # Both parts go to ValueError so the exception pickles (Celery, multiprocessing).
        super().__init__(field, message)
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"

    def within(self, prefix: str) -> FieldError:
        """The same error for a field nested under ``prefix`` (``a`` + ``config.x`` → ``a.config.x``)."""
        return FieldError(f"{prefix}.{self.field}" if prefix else self.field, self.message)


#: The engine's name for ``FieldError`` (the same class), kept for callers and settings files.
ConfigError = FieldError
