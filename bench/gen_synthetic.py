"""Generate synthetic Claude Code 2.1.x session transcripts for the replay benchmarks.

The corpus in /work/shared/corpus tops out at 4 MB per session, too small to show how the engine
scales. This script writes sessions of any size that have the same *shape* as real 2.1.39 main
session files (see /work/shared/docs/transcript-format.md), so parse, chain-building, token
counting and the pipeline steps do the same kind of work per byte as on real input:

* one user prompt per turn, preceded by a ``file-history-snapshot`` side record;
* each API response split over several assistant records that share ``message.id`` (thinking ->
  text -> tool_use x N), usage copied onto every record, ``output_tokens`` a small streaming
  snapshot except (usually) on the last record; cache_read = the previous prompt, cache_creation =
  what was added since, a cache miss after gaps longer than the 1 h cache TTL;
* parallel tool calls whose results sit on side branches (each result's parentUuid is the record
  holding its own tool_use; the next response hangs off the result written last), and 2.1.39-style
  sequential calls (tool_use -> result -> next tool_use of the same message.id);
* large Read results (5-60k chars with ``     1→`` line prefixes), Bash outputs with the exact
  ``<persisted-output>`` wrapper of pipeline-spec §4.2.6 above 30,000 chars (the full text stays
  in ``toolUseResult.stdout``), Edit results whose ``toolUseResult.originalFile`` repeats a file;
* hook_progress / bash_progress / agent_progress records, some of them links of the main chain;
* ``system`` stop_hook_summary + turn_duration at each turn end;
* an auto ``compact_boundary`` (parentUuid null, logicalParentUuid, compactMetadata) plus an
  ``isCompactSummary`` message whenever the simulated context passes ~167k tokens.

Everything comes from one ``random.Random(seed)``, so a seed and a size always give the same bytes.

Usage::

    python bench/gen_synthetic.py --size-mb 10 --seed 1 -o bench/data/synth-10mb.jsonl
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from random import Random
from typing import Any, BinaryIO

VERSION = "2.1.39"
MODEL = "claude-opus-4-6"

#: Autocompact threshold for a 200k window (spec §4.6.2: 200k - 20k output reserve - 13k buffer),
#: compared with Claude Code's ``tokenCountWithEstimation`` (§4.6.3), as the real trigger is.
AUTOCOMPACT_THRESHOLD = 167_000
#: Bash's declared maxResultSizeChars (spec §1.1): outputs strictly longer are persisted.
BASH_PERSIST_CHARS = 30_000
#: Preview length of a persisted output, in JS string units (spec §1.1 PREVIEW_SIZE_BYTES).
PREVIEW_CHARS = 2000
#: System prompt + tool definitions: the part of every request that stays cached (tokens).
SYSTEM_TOKENS = 21_000
#: Characters per *recorded* (Claude tokenizer) token. This text gives ~3.6 chars per cl100k
#: token, and on the corpus recorded usage runs 1.25-1.6x the cl100k count (the engine's fitted
#: calibration ratio), so 3.6 / 1.4 keeps the synthetic usage as far from cl100k as real usage.
CHARS_PER_TOKEN = 3.6 / 1.4
#: Files re-attached after a full compaction (spec §4.6.7): 5 most recent reads, each capped
#: (5,000 rough tokens ~ 7,000 recorded ones here), 50,000 in total.
RESTORE_FILES = 5
RESTORE_FILE_TOKENS = 7_000
RESTORE_TOTAL_TOKENS = 50_000

#: Smallest byte budget worth starting a new turn for (prompt + one response + turn-end records).
MIN_TURN_BYTES = 5_000
#: Below this remaining budget the current turn is wrapped up with a text-only response.
WRAP_UP_BYTES = 12_000

READ_REMINDER = (
    "\n\n<system-reminder>\nWhenever you read a file, you should consider whether it would be "
    "considered malware. You CAN and SHOULD provide analysis of malware, what it is doing. But you "
    "MUST refuse to improve or augment the code. You can still analyze existing code, write "
    "reports, or answer questions about the code behavior.\n</system-reminder>\n"
)
SUMMARY_PREAMBLE = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation.\n\n"
)
SUMMARY_CLOSING = (
    "Please continue the conversation from where we left off without asking the user any "
    "further questions. Continue with the last task that you were asked to work on."
)
TODO_RESULT = (
    "Todos have been modified successfully. Ensure that you continue to use the todo list to "
    "track your progress. Please proceed with the current tasks if applicable"
)


def _words(text: str) -> list[str]:
    """Split a whitespace-separated word list (kept as text blocks so they stay readable)."""
    return text.split()


# Built-in vocabulary. Prose mixes everyday words with the technical nouns and verbs that fill
# real assistant messages so that cl100k sees a realistic ratio of whole-word and split tokens.
_PROSE_WORDS = _words(
    """
the a an of to in and or for with on at by from into over under about after before between
is are was were be been has have had will would can could should must may might does did do
this that these those it its they them their we our you your he she which who what when where
why how not no yes all any each every some many more most less few other another same such
only also just still even then than there here now again once both either neither very quite
rather already almost always never often sometimes usually instead however therefore because
although while until unless since though whether so if else otherwise meanwhile likewise
file files function functions method methods class classes module modules package packages
test tests testing fixture fixtures assertion error errors exception exceptions warning
value values variable variables parameter parameters argument arguments return returns
result results output outputs input inputs request requests response responses handler
session sessions transcript transcripts message messages record records entry entries field
fields schema schemas index indexes query queries table tables column columns migration
config configuration setting settings option options flag flags environment default defaults
server client socket connection connections timeout retry retries cache caches buffer stream
parser parsing tokenizer token tokens context window budget threshold limit limits boundary
commit commits branch branches merge rebase diff patch repository worktree remote upstream
build builds compile compiler linker binary dependency dependencies version versions release
user users account accounts permission permissions role roles owner group groups policy
event events listener callback promise future task tasks worker workers queue queues job
path paths directory directories folder symlink permission mode header headers payload body
line lines column offset length size count number total average median maximum minimum
check checks verify validate validation ensure confirm detect handle handles handled handling
create creates created update updates updated delete deletes deleted remove removed rename
read reads write writes writing load loads loaded save saves saved store stores stored fetch
parse parses parsed format formats formatted render renders rendered display shows showed
run runs running ran start starts started stop stops stopped restart wait waits waited
add adds added insert inserted append appended replace replaced move moved copy copied
find finds found search searched match matches matched filter filtered sort sorted group
call calls called invoke invoked trigger triggered emit emitted dispatch dispatched
fix fixes fixed break breaks broke broken refactor refactored simplify simplified clean
implement implemented implementation design designed approach plan plans planned step steps
look looking looked see seeing seems seem appears appear notice noticed note notes noted
understand understood explain explained describe described mention mentioned suggest
correct correctly incorrect wrong right proper properly expected unexpected actual actually
current currently previous previously next first last second third final finally initial
new old existing missing empty null undefined invalid valid unknown known specific general
simple complex large small big tiny long short fast slow quick safe unsafe stable flaky
important critical minor major optional required necessary possible impossible likely
because of the way works correctly without any issues before merging into main branch
"""
)

# Rarer words and fragments: they split into several tokens, pulling chars/token toward ~4.
_RARE_WORDS = _words(
    """
idempotency serialization deserialization memoization normalisation reconciliation
heuristics amortized monotonic quiescent backpressure debounce throttling sharding
tombstone watermark checkpointing snapshotting hydration rehydrate denormalized upsert
vectorized coalesce lexicographic topological bisection exponential logarithmic
asynchronous synchronous concurrency parallelism reentrant mutex semaphore deadlock
livelock starvation preemption interleaving linearizable causality eventual consistency
Kubernetes PostgreSQL SQLite Redis Celery Django FastAPI pytest tiktoken webpack esbuild
TypeScript JavaScript Elixir Phoenix LiveView Tailwind HTMX Plotly NumPy pandas Rust Cargo
rustc clippy goroutine gofmt golangci mypy ruff pyright eslint prettier vitest playwright
"""
)

_IDENT_PARTS = _words(
    """
get set load save parse build make new init read write open close flush sync async fetch
send recv handle process run exec apply merge split join find filter map reduce sort group
count sum min max avg len size idx pos offset start end begin first last next prev head tail
user session token message record entry item node tree graph edge list dict map set queue
stack buffer cache store repo config opts ctx req resp err result value data meta info state
status event hook tool call block chunk batch page row col field key name path file dir url
id uuid ts time date seq num total limit budget window boundary summary preview output input
"""
)

_KEYWORDS = [
    "def",
    "return",
    "if",
    "elif",
    "else",
    "for",
    "while",
    "in",
    "not",
    "and",
    "or",
    "import",
    "from",
    "class",
    "const",
    "let",
    "func",
    "var",
    "await",
    "async",
    "yield",
    "raise",
    "try",
    "except",
    "finally",
    "with",
    "as",
    "lambda",
    "None",
    "True",
    "False",
    "nil",
    "err",
    "self",
    "this",
]
_EXTS = ["py", "ts", "tsx", "go", "ex", "rs", "js", "md", "toml", "json", "yaml", "sql", "css"]
_DIRS = [
    "src",
    "lib",
    "internal",
    "cmd",
    "pkg",
    "app",
    "tests",
    "test",
    "api",
    "core",
    "services",
    "handlers",
    "models",
    "views",
    "utils",
    "engine",
    "pipeline",
    "web",
    "static",
    "scripts",
    "docs",
]
_HOOK_COMMANDS = [
    "${CLAUDE_PLUGIN_ROOT}/scripts/pre-tool-capture.sh",
    "cd ${CLAUDE_PLUGIN_ROOT}/hooks && bun run ./guardian.ts",
    "${CLAUDE_PLUGIN_ROOT}/scripts/post-tool-capture.sh",
    "callback",
    "/home/USER/.claude/hooks/notify.sh mark",
    "bash ${CLAUDE_PROJECT_DIR}/.claude/scripts/check-format.sh",
]
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

Json = dict[str, Any]


# --------------------------------------------------------------------------- text


def format_file_size(size: int) -> str:
    """Claude Code's ``formatFileSize`` (spec §4.2.6): one decimal, trailing ``.0`` dropped.

    JS ``toFixed(1)`` rounds exact ties up (33.25 -> 33.3) where Python's float formatting rounds
    them to even; n/1024 is always exact in decimal, so Decimal with ROUND_HALF_UP matches JS.
    """
    if size < 1024:
        return f"{size} bytes"
    value = Decimal(size) / 1024
    for unit in ("KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            text = str(value.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))
            return (text[:-2] if text.endswith(".0") else text) + unit
        value /= 1024
    raise AssertionError("unreachable")


def sanitize_path(path: str) -> str:
    """``sanitizePath`` for project directory names: every non-alphanumeric char becomes ``-``.

    The 200-char truncation + hash branch of the spec is not needed: generated cwds are short.
    """
    if len(path) > 200:
        raise ValueError("generated cwd too long for the simple sanitizePath")
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in path)


def persisted_wrapper(content: str, file_path: str) -> str:
    """The model-visible replacement of an oversized tool output (spec §4.2.6, byte-exact)."""
    if len(content) <= PREVIEW_CHARS:
        preview, has_more = content, False
    else:
        head = content[:PREVIEW_CHARS]
        cut = head.rfind("\n")
        # cut at the last newline only when it keeps more than half of the preview
        preview = head[:cut] if cut > PREVIEW_CHARS // 2 else head
        has_more = True
    return (
        "<persisted-output>\n"
        f"Output too large ({format_file_size(len(content))}). Full output saved to: {file_path}"
        "\n\nPreview (first 2KB):\n"
        + preview
        + ("\n...\n" if has_more else "\n")
        + "</persisted-output>"
    )


class Lexicon:
    """Pools of sentences, code lines and log lines drawn once per seed, then sampled.

    Building every line from scratch would dominate the run time at 100 MB; sampling whole lines
    from pools of a few thousand keeps blocks unique (different sequences) at a fraction of the
    cost, and the token statistics are those of the pooled lines.
    """

    def __init__(self, rng: Random) -> None:
        self.rng = rng
        self.idents = [self._ident() for _ in range(3000)]
        self.files = [self._file_path() for _ in range(400)]
        self.sentences = [self._sentence() for _ in range(6000)]
        self.code_lines = [self._code_line() for _ in range(12000)]
        self.log_lines = [self._log_line() for _ in range(6000)]

    # -- pool builders (run once)

    def _ident(self) -> str:
        rng = self.rng
        parts = rng.choices(_IDENT_PARTS, k=rng.randint(1, 3))
        style = rng.random()
        if style < 0.45:
            return "_".join(parts)
        if style < 0.85:
            return parts[0] + "".join(p.title() for p in parts[1:])
        return "".join(p.title() for p in parts)

    def _file_path(self) -> str:
        rng = self.rng
        dirs = rng.choices(_DIRS, k=rng.randint(1, 3))
        return "/".join([*dirs, f"{rng.choice(self.idents).lower()}.{rng.choice(_EXTS)}"])

    def _sentence(self) -> str:
        rng = self.rng
        words: list[str] = []
        for _ in range(rng.randint(6, 24)):
            roll = rng.random()
            if roll < 0.68:
                words.append(rng.choice(_PROSE_WORDS))
            elif roll < 0.80:
                words.append(rng.choice(_RARE_WORDS))
            elif roll < 0.91:
                words.append(f"`{rng.choice(self.idents)}`")
            elif roll < 0.95:
                words.append(f"`{rng.choice(self.files)}`")
            else:
                words.append(
                    rng.choice(
                        [
                            str(rng.randint(2, 99999)),
                            f"{rng.choice(_PROSE_WORDS)},",
                            f"({rng.choice(_PROSE_WORDS)})",
                        ]
                    )
                )
        words[0] = words[0][:1].upper() + words[0][1:]
        if rng.random() < 0.15:
            words.insert(rng.randint(1, len(words) - 1), rng.choice(["(see", "e.g.", "i.e.", "—"]))
        end = rng.choice([".", ".", ".", ".", ":", "?", "!"])
        return " ".join(words) + end

    def _code_line(self) -> str:
        rng = self.rng
        indent = (
            " " * (4 * rng.choice([0, 1, 1, 2, 2, 2, 3, 4]))
            if rng.random() < 0.7
            else "\t" * rng.randint(0, 3)
        )
        a, b, c = (rng.choice(self.idents) for _ in range(3))
        kind = rng.randint(0, 11)
        if kind == 0:
            line = f"def {a}({b}: {c.title()}, {rng.choice(self.idents)}: int = {rng.randint(0, 512)}) -> {c.title()}:"
        elif kind == 1:
            line = f"{a} = {b}.{c}({rng.choice(self.idents)}, key={rng.randint(0, 99)!r})"
        elif kind == 2:
            line = f"if {a} is not None and {b}.{c} > {rng.randint(0, 4096)}:"
        elif kind == 3:
            line = f"return {a}[{b}:{c}] + [{rng.randint(0, 9)}]"
        elif kind == 4:
            line = f"func ({a[:1]} *{b.title()}) {c.title()}(ctx context.Context) (*{a.title()}, error) {{"
        elif kind == 5:
            line = f'if err := {a}.{c.title()}("{b}"); err != nil {{ return fmt.Errorf("{b}: %w", err) }}'
        elif kind == 6:
            line = f"const {a} = await {b}.{c}({{ limit: {rng.randint(1, 500)}, signal }});"
        elif kind == 7:
            line = f"# {rng.choice(self.sentences)[:90]}"
        elif kind == 8:
            line = f"// {rng.choice(self.sentences)[:90]}"
        elif kind == 9:
            line = f"{rng.choice(_KEYWORDS)} {a} {rng.choice(['=', '+=', '==', '!=', ':=', '->', '=>'])} {b}({c}, {rng.randint(0, 64)})"
        elif kind == 10:
            line = f'    "{a}": {rng.choice(["true", "false", "null", str(rng.randint(0, 10**6)), repr(b)])},'
        else:
            line = rng.choice(["}", "})", "end", "]", ")", "", "", "pass", "return nil", "}"])
        return indent + line

    def _log_line(self) -> str:
        rng = self.rng
        kind = rng.randint(0, 7)
        f = rng.choice(self.files)
        if kind == 0:
            return f"{f}:{rng.randint(1, 2000)}:{rng.randint(1, 80)}: {rng.choice(self.sentences)[:100]}"
        if kind == 1:
            return f"PASSED {f}::test_{rng.choice(self.idents).lower()} [{rng.randint(0, 100):>3}%]"
        if kind == 2:
            return f"FAILED {f}::test_{rng.choice(self.idents).lower()} - AssertionError: assert {rng.randint(0, 99)} == {rng.randint(0, 99)}"
        if kind == 3:
            return f"-rw-r--r--  1 dev staff {rng.randint(100, 999999):>8} Jan {rng.randint(1, 31):>2} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {f}"
        if kind == 4:
            return f"{rng.choice(['M', 'A', 'D', '??', 'R'])} {f}"
        if kind == 5:
            return f"[{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}] {rng.choice(['INFO', 'DEBUG', 'WARN', 'ERROR'])} {rng.choice(self.idents)}: {rng.choice(self.sentences)[:80]}"
        if kind == 6:
            return f"  ✓ {rng.choice(self.sentences)[:70]} ({rng.randint(1, 900)}ms)"
        return rng.choice(self.code_lines).strip()

    # -- samplers

    def prose(self, chars: int, paragraphs: bool = True) -> str:
        rng = self.rng
        out: list[str] = []
        size = 0
        while size < chars:
            take = rng.choices(self.sentences, k=rng.randint(1, 5))
            para = " ".join(take)
            if paragraphs and rng.random() < 0.25:
                para = "- " + para.replace(". ", ".\n- ", 2)
            if paragraphs and rng.random() < 0.08:
                para = f"## {rng.choice(self.idents).replace('_', ' ').title()}\n\n{para}"
            if paragraphs and rng.random() < 0.12:
                code = "\n".join(rng.choices(self.code_lines, k=rng.randint(2, 12)))
                para += f"\n\n```{rng.choice(_EXTS)}\n{code}\n```"
            out.append(para)
            size += len(para) + 2
        return "\n\n".join(out)[: max(chars, 1)]

    def lines(self, pool: Sequence[str], chars: int) -> list[str]:
        rng = self.rng
        out: list[str] = []
        size = 0
        while size < chars:
            batch = rng.choices(pool, k=32)
            out.extend(batch)
            size += sum(len(x) + 1 for x in batch)
        # trim the overshoot of the last batch
        while out and size - len(out[-1]) - 1 >= chars:
            size -= len(out.pop()) + 1
        return out


# --------------------------------------------------------------------------- ids


class Ids:
    def __init__(self, rng: Random) -> None:
        self.rng = rng

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def b62(self, n: int) -> str:
        return "".join(self.rng.choices(_BASE62, k=n))

    def tool(self) -> str:
        return "toolu_01" + self.b62(22)

    def msg(self) -> str:
        return "msg_01" + self.b62(22)

    def req(self) -> str:
        return "req_011C" + self.b62(20)

    def signature(self) -> str:
        return base64.b64encode(self.rng.randbytes(self.rng.randint(200, 700))).decode()

    def hex(self, n: int) -> str:
        return f"{self.rng.getrandbits(4 * n):0{n}x}"


# --------------------------------------------------------------------------- session writer


class ToolCall:
    """One tool_use and the result Claude Code recorded for it."""

    __slots__ = (
        "content",
        "extra_progress",
        "input",
        "is_error",
        "name",
        "result",
        "run_s",
        "use_id",
    )

    def __init__(self, name: str, tool_input: Json, use_id: str) -> None:
        self.name = name
        self.input = tool_input
        self.use_id = use_id
        #: model-visible tool_result content (string or list of text blocks)
        self.content: str | list[Json] = ""
        #: toolUseResult (UI-only)
        self.result: Any = None
        self.is_error = False
        self.run_s = 0.05
        #: progress records (data dicts) written while the tool runs
        self.extra_progress: list[Json] = []


class SessionWriter:
    """Writes one synthetic session to ``out`` until about ``target_bytes`` are written."""

    def __init__(self, out: BinaryIO, target_bytes: int, seed: int, version: str = VERSION) -> None:
        self.out = out
        self.target = target_bytes
        self.rng = Random(seed)
        self.ids = Ids(self.rng)
        self.lex = Lexicon(self.rng)
        self.written = 0
        rng = self.rng
        self.session_id = self.ids.uuid()
        project = "-".join(rng.choices(_IDENT_PARTS, k=2))
        self.cwd = f"/home/USER/projects/{project}"
        self.project_dir = f"/home/USER/.claude/projects/{sanitize_path(self.cwd)}"
        self.envelope: Json = {
            "parentUuid": None,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": version,
            "gitBranch": f"feature/{rng.choice(_IDENT_PARTS)}-{rng.choice(_IDENT_PARTS)}",
            "slug": "-".join(rng.choices(_PROSE_WORDS[150:400], k=3)),
        }
        self.clock = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC) + timedelta(
            days=seed % 300, seconds=rng.randint(0, 36000)
        )
        self.tip: str | None = None  # uuid the next chain record hangs off
        # simulated prompt size of the next request, and the prefix cached by the last one
        self.context = SYSTEM_TOKENS
        # Claude Code's own estimate (spec §4.6.3): last usage total + rough tail since then
        self.anchor_total: int | None = None
        self.rough_tail = 0
        self.cached = 0
        self.cache_cold = True
        self.todos: list[Json] = []
        self.tracked: dict[str, Json] = {}
        #: path -> recorded tokens of the last Read of it, oldest first (readFileState)
        self.recent_reads: dict[str, int] = {}
        # guarantee the features the tests look for even in a 200 KB file
        self.need_persisted = True
        self.need_parallel = True
        self.stats: dict[str, int] = {
            "turns": 0,
            "responses": 0,
            "tool_calls": 0,
            "parallel_batches": 0,
            "persisted": 0,
            "compactions": 0,
        }

    # -- low-level output

    @property
    def remaining(self) -> int:
        return self.target - self.written

    def emit(self, obj: Json) -> None:
        data = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        self.out.write(data)
        self.written += len(data)

    def ts(self) -> str:
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"

    def tick(self, low: float, high: float) -> None:
        self.clock += timedelta(seconds=self.rng.uniform(low, high))

    def chain(self, rtype: str, parent: str | None, body: Json, tail: Json | None = None) -> str:
        """Write a conversation record in 2.1.39 key order; return its uuid."""
        rec_uuid = self.ids.uuid()
        rec: Json = {**self.envelope, "parentUuid": parent}
        if rtype == "assistant":
            rec.update(body)
            rec.update({"type": "assistant", "uuid": rec_uuid, "timestamp": self.ts()})
        else:
            rec["type"] = rtype
            rec.update(body)
            rec.update({"uuid": rec_uuid, "timestamp": self.ts()})
        if tail:
            rec.update(tail)
        self.emit(rec)
        return rec_uuid

    def progress(
        self,
        parent: str | None,
        data: Json,
        tool_use_id: str,
        parent_tool_use_id: str | None = None,
    ) -> str:
        rec_uuid = self.ids.uuid()
        self.emit(
            {
                **self.envelope,
                "parentUuid": parent,
                "type": "progress",
                "data": data,
                "parentToolUseID": parent_tool_use_id or tool_use_id,
                "toolUseID": tool_use_id,
                "timestamp": self.ts(),
                "uuid": rec_uuid,
            }
        )
        return rec_uuid

    def hooks(
        self, parent: str | None, event: str, matcher: str, tool_use_id: str, count: int
    ) -> str | None:
        """A chain of ``count`` hook_progress records; returns the last uuid (or ``parent``)."""
        last = parent
        for command in self.rng.sample(_HOOK_COMMANDS, k=min(count, len(_HOOK_COMMANDS))):
            data = {
                "type": "hook_progress",
                "hookEvent": event,
                "hookName": f"{event}:{matcher}" if matcher else event,
                "command": command,
            }
            last = self.progress(last, data, tool_use_id)
        return last

    # -- token bookkeeping

    @staticmethod
    def tokens(text: str) -> int:
        return int(len(text) / CHARS_PER_TOKEN) + 1

    @staticmethod
    def rough(text: str) -> int:
        """``roughTokenCountEstimation``: JS Math.round(length / 4) (all text here is BMP)."""
        return (len(text) * 2 + 4) // 8

    def add_context(self, tokens: int, rough: int) -> None:
        """Grow the simulated prompt (recorded tokens) and Claude Code's estimate of the tail."""
        self.context += tokens
        self.rough_tail += rough

    def decision_tokens(self) -> int:
        """``tokenCountWithEstimation``: usage total of the last response + rough estimate of
        every record after its first one; compaction fires on this, not on the true size."""
        if self.anchor_total is None:
            return self.context
        return self.anchor_total + self.rough_tail

    # -- session

    def write(self) -> dict[str, int]:
        first = True
        while first or self.remaining > MIN_TURN_BYTES:
            self.turn(first)
            first = False
        return self.stats

    def turn(self, first: bool) -> None:
        rng = self.rng
        self.stats["turns"] += 1
        if not first:
            # minutes between turns, now and then a break longer than the 1 h cache TTL
            if rng.random() < 0.05:
                self.tick(3700, 6 * 3600)
                self.cache_cold = True
            else:
                self.tick(30, 900)
        prompt_uuid = self.ids.uuid()
        self.emit(
            {
                "type": "file-history-snapshot",
                "messageId": prompt_uuid,
                "snapshot": {
                    "messageId": prompt_uuid,
                    "trackedFileBackups": dict(self.tracked),
                    "timestamp": self.ts(),
                },
                "isSnapshotUpdate": False,
            }
        )
        if first:
            # SessionStart hooks are the root of the chain; the prompt hangs off the last one
            self.tip = self.hooks(
                None, "SessionStart", "startup", self.ids.uuid(), rng.randint(1, 3)
            )
        turn_start = self.clock
        prompt = self.lex.prose(
            int(rng.lognormvariate(5.5, 1.0)) + 20, paragraphs=rng.random() < 0.3
        )
        body = {"message": {"role": "user", "content": prompt}}
        tail = {
            "thinkingMetadata": {"maxThinkingTokens": 31999},
            "todos": self.todos,
            "permissionMode": "acceptEdits",
        }
        rec = {
            **self.envelope,
            "parentUuid": self.tip,
            "type": "user",
            **body,
            "uuid": prompt_uuid,
            "timestamp": self.ts(),
            **tail,
        }
        self.emit(rec)
        self.tip = prompt_uuid
        self.add_context(self.tokens(prompt) + 4, self.rough(prompt))
        steps = min(40, int(rng.expovariate(1 / 6)) + 1)
        for step in range(steps + 1):
            final = step == steps or self.remaining < WRAP_UP_BYTES
            if self.decision_tokens() >= AUTOCOMPACT_THRESHOLD and self.remaining > 40_000:
                self.compact()
            last_record = self.response(final)
            if final:
                break
        else:  # pragma: no cover - the loop always ends with a final response
            last_record = self.tip
        self.turn_end(last_record, turn_start)

    def turn_end(self, last_record: str | None, turn_start: datetime) -> None:
        rng = self.rng
        stop_id = self.ids.uuid()
        self.tick(0.05, 0.3)
        tip = self.hooks(last_record, "Stop", "", stop_id, rng.randint(1, 3))
        self.tick(0.05, 0.2)
        hooks = [{"command": c} for c in rng.sample(_HOOK_COMMANDS, k=rng.randint(1, 3))]
        summary = {
            "subtype": "stop_hook_summary",
            "hookCount": len(hooks),
            "hookInfos": hooks,
            "hookErrors": [],
            "preventedContinuation": False,
            "stopReason": "",
            "hasOutput": True,
            "level": "suggestion",
        }
        tip = self.chain("system", tip, summary, {"toolUseID": stop_id})
        duration = int((self.clock - turn_start).total_seconds() * 1000)
        self.tip = self.chain(
            "system", tip, {"subtype": "turn_duration", "durationMs": duration}, {"isMeta": False}
        )

    # -- one API response

    def rough_block(self, block: Json) -> int:
        if block["type"] == "thinking":
            return self.rough(block["thinking"])
        if block["type"] == "tool_use":
            return self.rough(
                block["name"]
                + json.dumps(block["input"], ensure_ascii=False, separators=(",", ":"))
            )
        return self.rough(block["text"])

    def usage(self, output_tokens: int) -> Json:
        if self.cache_cold:
            # after a >1 h pause only the system prompt + tools prefix is still warm (or nothing)
            read = SYSTEM_TOKENS if self.cached else 0
            self.cache_cold = False
        else:
            read = self.cached
        read = min(read, self.context)
        write = self.context - read
        self.cached = self.context
        return {
            "input_tokens": self.rng.randint(1, 3),
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": write},
            "output_tokens": output_tokens,
            "service_tier": "standard",
            "inference_geo": "not_available",
        }

    def response(self, final: bool) -> str:
        """Write one split assistant response and its tool results; return the last chain uuid."""
        rng = self.rng
        self.stats["responses"] += 1
        msg_id, req_id = self.ids.msg(), self.ids.req()
        blocks: list[Json] = []
        if rng.random() < 0.2:
            blocks.append({"type": "text", "text": "\n\n"})
        if rng.random() < 0.55:
            size = min(int(rng.lognormvariate(5.8, 0.9)) + 40, max(100, self.remaining // 8))
            thinking = self.lex.prose(size, paragraphs=False)
            blocks.append(
                {"type": "thinking", "thinking": thinking, "signature": self.ids.signature()}
            )
        calls: list[ToolCall] = []
        if final:
            size = min(int(rng.lognormvariate(6.5, 0.9)) + 40, max(200, self.remaining // 6))
            blocks.append({"type": "text", "text": self.lex.prose(size)})
        else:
            if rng.random() < 0.6:
                blocks.append(
                    {
                        "type": "text",
                        "text": self.lex.prose(
                            int(rng.lognormvariate(4.8, 0.7)) + 20, paragraphs=False
                        ),
                    }
                )
            n_tools = 1 if rng.random() < 0.72 else rng.randint(2, 5)
            if self.need_parallel and n_tools == 1 and self.stats["responses"] >= 2:
                n_tools = 2
            # each call costs ~3 KB of envelopes and hooks on top of its output
            n_tools = max(1, min(n_tools, self.remaining // 12_000))
            # bytes each call may add to the file: keeps small targets within a few percent
            budget = max(1_500, int(self.remaining * 0.4 / n_tools))
            calls = [self.make_call(budget) for _ in range(n_tools)]
            for call in calls:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.use_id,
                        "name": call.name,
                        "input": call.input,
                        "caller": {"type": "direct"},
                    }
                )
        out_tokens = sum(
            self.tokens(json.dumps(b, ensure_ascii=False))
            for b in blocks
            if b["type"] != "thinking"
        )
        out_tokens += sum(self.tokens(b["thinking"]) for b in blocks if b["type"] == "thinking")
        usage = self.usage(out_tokens)
        snapshot = rng.randint(1, 10)
        # 2.1.x often leaves even the last record with the streaming snapshot (format §5)
        final_output = out_tokens if rng.random() < 0.7 else snapshot
        self.tick(1.5, 8.0)
        parallel = len(calls) >= 2 and (self.need_parallel or rng.random() < 0.6)
        tip = self.tip
        use_records: dict[str, str] = {}
        for i, block in enumerate(blocks):
            last = i == len(blocks) - 1
            message = {
                "model": MODEL,
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {**usage, "output_tokens": final_output if last else snapshot},
            }
            if block["type"] == "tool_use" and not parallel and use_records:
                # 2.1.39 streaming: run the previous tool before writing the next tool_use
                tip = self.run_tool(
                    calls[len(use_records) - 1], use_records[calls[len(use_records) - 1].use_id]
                )
            tip = self.chain("assistant", tip, {"message": message, "requestId": req_id})
            if block["type"] == "tool_use":
                use_records[block["id"]] = tip
            self.tick(0.2, 1.5)
        self.context += out_tokens
        # the anchor of the next estimate: this response's recorded usage (last record) plus the
        # rough size of its later block records; tool results are added as they come
        self.anchor_total = (
            usage["input_tokens"]
            + usage["cache_creation_input_tokens"]
            + usage["cache_read_input_tokens"]
            + final_output
        )
        self.rough_tail = sum(self.rough_block(b) for b in blocks[1:])
        if calls and parallel:
            self.stats["parallel_batches"] += 1
            self.need_parallel = False
            order = list(calls)
            rng.shuffle(order)
            for call in order:
                tip = self.run_tool(call, use_records[call.use_id])
            if rng.random() < 0.3:
                # a PostToolUse hook written after the last result becomes a link of the chain
                tip = self.hooks(tip, "PostToolUse", order[-1].name, order[-1].use_id, 1)
        elif calls:
            tip = self.run_tool(calls[-1], use_records[calls[-1].use_id])
        self.tip = tip
        return tip or ""

    def run_tool(self, call: ToolCall, use_record: str) -> str:
        """Write progress + the tool_result record (parent = the tool_use record)."""
        rng = self.rng
        self.stats["tool_calls"] += 1
        if rng.random() < 0.6:
            # PreToolUse hooks: a side chain hanging off the tool_use record
            self.hooks(use_record, "PreToolUse", call.name, call.use_id, rng.randint(1, 4))
        side = use_record
        for n, data in enumerate(call.extra_progress):
            self.tick(
                call.run_s / (len(call.extra_progress) + 1),
                call.run_s / (len(call.extra_progress) + 1),
            )
            tool_use_id = (
                f"bash-progress-{n}"
                if data["type"] == "bash_progress"
                else f"agent_msg_{self.ids.msg()[4:]}"
            )
            side = self.progress(side, data, tool_use_id, call.use_id)
        if not call.extra_progress:
            self.tick(call.run_s, call.run_s)
        if rng.random() < 0.7:
            self.hooks(use_record, "PostToolUse", call.name, call.use_id, rng.randint(1, 3))
        block: Json = {"tool_use_id": call.use_id, "type": "tool_result", "content": call.content}
        if call.is_error or call.name == "Bash":
            block["is_error"] = call.is_error
        body = {"message": {"role": "user", "content": [block]}}
        tail = {"toolUseResult": call.result, "sourceToolAssistantUUID": use_record}
        uuid_ = self.chain("user", use_record, body, tail)
        text = (
            call.content
            if isinstance(call.content, str)
            else "\n".join(b["text"] for b in call.content)
        )
        if isinstance(call.content, str):
            rough = self.rough(call.content)
        else:
            rough = sum(self.rough(b["text"]) for b in call.content)
        self.add_context(self.tokens(text) + 8, rough)
        if call.name in ("Edit", "Write") and not call.is_error and rng.random() < 0.5:
            path = call.input["file_path"].removeprefix(self.cwd + "/")
            version = self.tracked.get(path, {}).get("version", 0) + 1
            self.tracked[path] = {
                "backupFileName": f"{self.ids.hex(16)}@v{version}",
                "version": version,
                "backupTime": self.ts(),
            }
            self.emit(
                {
                    "type": "file-history-snapshot",
                    "messageId": self.ids.uuid(),
                    "snapshot": {
                        "messageId": self.ids.uuid(),
                        "trackedFileBackups": dict(self.tracked),
                        "timestamp": self.ts(),
                    },
                    "isSnapshotUpdate": True,
                }
            )
        return uuid_

    # -- tools

    def make_call(self, budget: int) -> ToolCall:
        rng = self.rng
        if self.need_persisted and self.remaining > 120_000 and self.stats["responses"] >= 2:
            name = "Bash"
        else:
            name = rng.choices(
                ["Read", "Bash", "Edit", "Grep", "Glob", "TodoWrite", "Write", "Task"],
                weights=[32, 26, 15, 10, 5, 5, 4, 3],
            )[0]
        maker: Callable[[ToolCall, int], None] = getattr(self, f"tool_{name.lower()}")
        call = ToolCall(name, {}, self.ids.tool())
        maker(call, budget)
        return call

    def abs_path(self, editing: bool = False) -> str:
        # edits concentrate on a small working set (it also bounds file-history snapshots)
        pool = self.lex.files[:30] if editing else self.lex.files
        return f"{self.cwd}/{self.rng.choice(pool)}"

    def tool_read(self, call: ToolCall, budget: int) -> None:
        rng = self.rng
        path = self.abs_path()
        call.input = {"file_path": path}
        call.run_s = rng.uniform(0.005, 0.08)
        if rng.random() < 0.04:
            call.is_error = True
            call.content = "<tool_use_error>File does not exist.</tool_use_error>"
            call.result = "Error: File does not exist."
            return
        wanted = rng.uniform(5_000, 60_000) if rng.random() < 0.6 else rng.uniform(300, 5_000)
        # the text is stored twice (numbered tool_result + raw toolUseResult): ~2.3 bytes/char
        size = min(int(budget / 2.3), int(wanted))
        lines = self.lex.lines(self.lex.code_lines, size)
        start = 1
        total = len(lines)
        if rng.random() < 0.25:
            start = rng.randint(20, 3000)
            total = start + len(lines) + rng.randint(0, 500)
            call.input.update({"offset": start, "limit": len(lines)})
        numbered = "\n".join(f"{start + i:>6}→{line}" for i, line in enumerate(lines))
        call.content = numbered + READ_REMINDER
        self.recent_reads.pop(path, None)
        self.recent_reads[path] = self.tokens(numbered)
        call.result = {
            "type": "text",
            "file": {
                "filePath": path,
                "content": "\n".join(lines),
                "numLines": len(lines),
                "startLine": start,
                "totalLines": total,
            },
        }

    def tool_bash(self, call: ToolCall, budget: int) -> None:
        rng = self.rng
        command = rng.choice(
            [
                f"pytest -x -q {rng.choice(self.lex.files)}",
                f"git diff --stat {rng.choice(['HEAD~1', 'main', 'origin/main'])}",
                "git status --short",
                f"rg -n {rng.choice(self.lex.idents)} {rng.choice(_DIRS)}",
                f"ls -la {rng.choice(_DIRS)}",
                f"go test ./{rng.choice(_DIRS)}/... 2>&1 | tail -{rng.randint(20, 200)}",
                "npm run build 2>&1",
                f"cat {rng.choice(self.lex.files)} | head -{rng.randint(20, 400)}",
            ]
        )
        call.input = {"command": command, "description": self.lex.prose(40, paragraphs=False)[:60]}
        if rng.random() < 0.3:
            call.input["timeout"] = rng.choice([60000, 120000, 300000])
        call.run_s = rng.uniform(0.2, 45.0)
        roll = rng.random()
        force = self.need_persisted and self.remaining > 120_000 and self.stats["responses"] >= 2
        if force or (roll < 0.06 and budget > 40_000):
            # persisted: stored once in toolUseResult.stdout, plus a ~2 KB preview
            top = min(150_000, max(BASH_PERSIST_CHARS + 1_000, budget - 4_000))
            size = int(rng.uniform(BASH_PERSIST_CHARS + 500, top))
        elif roll < 0.25:
            # inline: stored twice (tool_result + stdout)
            size = min(int(budget / 2.1), int(rng.uniform(3_000, 29_000)))
        else:
            size = min(int(budget / 2.1), int(rng.lognormvariate(6.0, 1.2)) + 10)
        stdout = "\n".join(self.lex.lines(self.lex.log_lines, size))
        call.is_error = rng.random() < 0.07
        call.result = {
            "stdout": stdout,
            "stderr": "",
            "interrupted": False,
            "isImage": False,
            "noOutputExpected": False,
        }
        if call.run_s > 3:
            # bash_progress snapshots every ~1-2 s while the command runs
            shown = stdout[: rng.randint(0, 400)]
            for n in range(min(8, int(call.run_s / 2))):
                part = shown[: len(shown) * (n + 1) // 8]
                call.extra_progress.append(
                    {
                        "type": "bash_progress",
                        "output": part,
                        "fullOutput": part,
                        "elapsedTimeSeconds": 2 * (n + 1),
                        "totalLines": part.count("\n"),
                        "timeoutMs": call.input.get("timeout", 120000),
                    }
                )
        if len(stdout) > BASH_PERSIST_CHARS:
            path = f"{self.project_dir}/{self.session_id}/tool-results/{call.use_id}.txt"
            call.content = persisted_wrapper(stdout, path)
            call.is_error = False
            self.need_persisted = False
            self.stats["persisted"] += 1
        elif call.is_error:
            call.content = f"Exit code {rng.choice([1, 2, 127])}\n{stdout}"
        else:
            call.content = stdout

    def tool_edit(self, call: ToolCall, budget: int) -> None:
        rng = self.rng
        path = self.abs_path(editing=True)
        # old/new strings are stored three times (input, result, structuredPatch)
        most = max(1, min(16, budget // 400))
        old = "\n".join(rng.choices(self.lex.code_lines, k=rng.randint(1, most)))
        new = "\n".join(rng.choices(self.lex.code_lines, k=rng.randint(1, most)))
        call.input = {"replace_all": False, "file_path": path, "old_string": old, "new_string": new}
        call.run_s = rng.uniform(0.01, 0.3)
        if rng.random() < 0.05:
            call.is_error = True
            call.content = "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>"
            call.result = "Error: File has not been read yet. Read it first before writing to it."
            return
        original = "\n".join(
            self.lex.lines(
                self.lex.code_lines,
                min(budget - 3 * (len(old) + len(new)), int(rng.uniform(1_000, 25_000))),
            )
        )
        start = rng.randint(1, 400)
        call.content = f"The file {path} has been updated successfully."
        call.result = {
            "filePath": path,
            "oldString": old,
            "newString": new,
            "originalFile": original,
            "structuredPatch": [
                {
                    "oldStart": start,
                    "oldLines": old.count("\n") + 1,
                    "newStart": start,
                    "newLines": new.count("\n") + 1,
                    "lines": [f"-{x}" for x in old.split("\n")]
                    + [f"+{x}" for x in new.split("\n")],
                }
            ],
            "userModified": False,
            "replaceAll": False,
        }

    def tool_write(self, call: ToolCall, budget: int) -> None:
        path = self.abs_path(editing=True)
        content = "\n".join(
            self.lex.lines(
                self.lex.code_lines, min(int(budget / 2.2), int(self.rng.uniform(500, 8_000)))
            )
        )
        call.input = {"file_path": path, "content": content}
        call.content = f"File created successfully at: {path}"
        call.result = {
            "type": "create",
            "filePath": path,
            "content": content,
            "structuredPatch": [],
            "originalFile": None,
        }

    def tool_grep(self, call: ToolCall, budget: int) -> None:
        rng = self.rng
        pattern = rng.choice(self.lex.idents)
        if rng.random() < 0.5:
            files = rng.sample(self.lex.files, k=rng.randint(0, 25))
            call.input = {"pattern": pattern, "path": self.cwd, "output_mode": "files_with_matches"}
            call.content = (
                f"Found {len(files)} files\n" + "\n".join(files) if files else "No files found"
            )
            call.result = {"mode": "files_with_matches", "filenames": files, "numFiles": len(files)}
        else:
            lines = self.lex.lines(
                self.lex.log_lines[:2000],
                min(int(budget / 2.1), int(rng.lognormvariate(7.0, 1.0))),
            )
            call.input = {"pattern": pattern, "output_mode": "content", "-n": True}
            call.content = "\n".join(lines)
            call.result = {
                "mode": "content",
                "numFiles": 0,
                "filenames": [],
                "content": call.content,
                "numLines": len(lines),
            }

    def tool_glob(self, call: ToolCall, budget: int) -> None:
        rng = self.rng
        most = max(1, min(60, budget // 150))
        files = [f"{self.cwd}/{f}" for f in rng.sample(self.lex.files, k=rng.randint(1, most))]
        call.input = {"pattern": f"**/*.{rng.choice(_EXTS)}"}
        call.content = "\n".join(files)
        call.result = {
            "filenames": files,
            "durationMs": rng.randint(5, 900),
            "numFiles": len(files),
            "truncated": False,
        }

    def tool_todowrite(self, call: ToolCall, budget: int) -> None:
        rng = self.rng
        todos = [
            {
                "content": self.lex.prose(60, paragraphs=False)[:70],
                "status": rng.choice(["pending", "in_progress", "completed"]),
                "activeForm": self.lex.prose(50, paragraphs=False)[:60],
            }
            for _ in range(rng.randint(2, 8))
        ]
        call.input = {"todos": todos}
        call.content = TODO_RESULT
        call.result = {"oldTodos": self.todos, "newTodos": todos}
        self.todos = todos

    def tool_task(self, call: ToolCall, budget: int) -> None:
        rng = self.rng
        # the prompt is repeated in input, toolUseResult and every agent_progress record
        prompt = self.lex.prose(min(rng.randint(200, 1200), budget // 12))
        agent_id = self.ids.hex(7)
        report = self.lex.prose(min(int(budget / 2.2), rng.randint(1_500, 9_000)))
        tokens, tool_uses, duration = (
            rng.randint(8_000, 90_000),
            rng.randint(3, 40),
            rng.randint(10_000, 400_000),
        )
        call.input = {
            "description": self.lex.prose(30, paragraphs=False)[:40],
            "prompt": prompt,
            "subagent_type": "Explore",
        }
        call.run_s = duration / 1000
        content = [
            {"type": "text", "text": report},
            {
                "type": "text",
                "text": f"agentId: {agent_id} (for resuming to continue this agent's work if needed)\n"
                f"<usage>total_tokens: {tokens}\ntool_uses: {tool_uses}\nduration_ms: {duration}</usage>",
            },
        ]
        call.content = content
        call.result = {
            "status": "completed",
            "prompt": prompt,
            "agentId": agent_id,
            "content": content[:1],
            "totalDurationMs": duration,
            "totalTokens": tokens,
            "totalToolUseCount": tool_uses,
            "usage": {
                "input_tokens": 0,
                "cache_creation_input_tokens": 900,
                "cache_read_input_tokens": tokens - 900,
                "output_tokens": 1500,
            },
        }
        # agent_progress mirrors of the subagent's messages (UI-only, they only add bytes)
        for n in range(rng.randint(1, 4) if budget > 12_000 else 1):
            text = prompt if n == 0 else self.lex.prose(rng.randint(100, 800))
            role = "user" if n == 0 else "assistant"
            call.extra_progress.append(
                {
                    "message": {
                        "type": role,
                        "message": {"role": role, "content": [{"type": "text", "text": text}]},
                        "uuid": self.ids.uuid(),
                        "timestamp": self.ts(),
                    },
                    "normalizedMessages": [],
                    "type": "agent_progress",
                    "prompt": prompt,
                    "agentId": agent_id,
                }
            )

    # -- compaction

    def compact(self) -> None:
        """Auto compaction between two API calls: boundary root + summary, context reset."""
        rng = self.rng
        self.stats["compactions"] += 1
        pre_tokens = self.decision_tokens()
        self.tick(45, 110)
        boundary = self.ids.uuid()
        self.emit(
            {
                **self.envelope,
                "parentUuid": None,
                "logicalParentUuid": self.tip,
                "type": "system",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "isMeta": False,
                "timestamp": self.ts(),
                "uuid": boundary,
                "level": "info",
                "compactMetadata": {"trigger": "auto", "preTokens": pre_tokens},
            }
        )
        analysis = self.lex.prose(rng.randint(2_500, 6_000))
        summary = self.lex.prose(rng.randint(5_000, 9_000))
        text = (
            SUMMARY_PREAMBLE
            + f"Analysis:\n{analysis}\n\nSummary:\n{summary}\n\n"
            + "If you need specific details from before compaction (like exact code snippets, error "
            + "messages, or content you generated), read the full transcript at: "
            + f"{self.project_dir}/{self.session_id}.jsonl\n"
            + SUMMARY_CLOSING
        )
        self.clock += timedelta(milliseconds=1)
        body = {"message": {"role": "user", "content": text}}
        tail = {"isVisibleInTranscriptOnly": True, "isCompactSummary": True}
        summary_uuid = self.chain("user", boundary, body, tail)
        # SessionStart:compact hooks run after the summary and link the chain onwards
        self.tip = self.hooks(
            summary_uuid, "SessionStart", "compact", self.ids.uuid(), rng.randint(1, 3)
        )
        # only the system prompt + tools stay cached; everything else is new
        # the new prompt: system prefix + summary + the most recently read files, re-attached
        restored = 0
        for tokens in list(reversed(self.recent_reads.values()))[:RESTORE_FILES]:
            part = min(tokens, RESTORE_FILE_TOKENS)
            if restored + part > RESTORE_TOTAL_TOKENS:
                break
            restored += part
        self.recent_reads.clear()
        self.context = SYSTEM_TOKENS + self.tokens(text) + restored
        self.cached = SYSTEM_TOKENS
        # no usage after the boundary yet: the estimate restarts from the summary alone
        self.anchor_total = None
        self.rough_tail = self.rough(text)


def generate(
    path: str | Path, size_bytes: int, seed: int, version: str = VERSION
) -> dict[str, int]:
    """Write a session of about ``size_bytes`` to ``path``; return counts of what was written."""
    out_path = Path(path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with out_path.open("wb", buffering=1 << 20) as out:
        writer = SessionWriter(out, size_bytes, seed, version)
        stats = writer.write()
        stats["bytes"] = writer.written
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--size-mb", type=float, help="target size in MiB (1 MiB = 1,048,576 bytes)")
    size.add_argument("--size-kb", type=float, help="target size in KiB")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--version", default=VERSION, help="Claude Code version written on every record"
    )
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    target = int(args.size_mb * 1024**2) if args.size_mb is not None else int(args.size_kb * 1024)
    started = time.perf_counter()
    stats = generate(args.output, target, args.seed, args.version)
    elapsed = time.perf_counter() - started
    deviation = (stats["bytes"] - target) / target * 100
    details = ", ".join(f"{k}={v}" for k, v in stats.items())
    print(
        f"{args.output}: {details} ({deviation:+.2f}% of target) in {elapsed:.1f}s", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
