"""Claude Code's context pipeline, one module per step, in the order ``queryLoop`` runs them."""

from __future__ import annotations

from .autocompact import Autocompact
from .base import Step, StepContext, View
from .blocking import BlockingLimit
from .boundary import BoundarySlice
from .budget import ToolResultBudget
from .collapse import ContextCollapse
from .microcompact import Microcompact
from .persistence import ToolResultPersistence
from .snip import Snip
from .truncation import ToolOutputTruncation

#: The steps in Claude Code's order (spec §3): boundary slice, per-tool persistence (tool time),
#: aggregate budget, snip, microcompact, context collapse, autocompact, blocking limit; Codex's
#: tool-output truncation (off unless set) at tool time, beside persistence.
DEFAULT_STEPS: tuple[Step, ...] = (
    BoundarySlice(),
    ToolResultPersistence(),
    ToolOutputTruncation(),
    ToolResultBudget(),
    Snip(),
    Microcompact(),
    ContextCollapse(),
    Autocompact(),
    BlockingLimit(),
)

__all__ = ["DEFAULT_STEPS", "Step", "StepContext", "View"]
