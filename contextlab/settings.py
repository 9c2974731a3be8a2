"""The one settings module. Every knob is an environment variable with a local default.

With no environment at all, ContextLab starts on SQLite and an embedded Celery broker (kombu's
``filesystem://`` transport under ``var/``), so ``make run`` needs no server. docker-compose
sets ``DATABASE_URL`` (PostgreSQL) and ``CELERY_BROKER_URL`` (Redis). README.md lists them all.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from contextlab.local_secret import (
    ensure_secret_key_file,
    read_secret_key_file,
    secret_key_file,
)

# Lets runtime code write ModelAdmin[Model] and similar generics that the type stubs declare.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


#: Off unless asked for (``DEBUG=true make run``): a wrong link shows the friendly error pages,
#: and neither pages nor the API ever answer with a traceback.
DEBUG = env_bool("DEBUG", False)

#: Writable runtime data (SQLite database, uploads, embedded broker); never committed.
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))

# SECRET_KEY: the environment's, else the key file $VAR_DIR/secret_key, else (DEBUG only) a fixed
# development key. In a checkout's own ./var (VAR_DIR unset: a local checkout, never the Docker
# image, which sets VAR_DIR=/data) the key file is generated on first use, mode 0600, so
# `make run`, `manage.py` and mypy need no setup; `make run` also creates it in any VAR_DIR.
# Anywhere else, a DEBUG-off start without a key is refused.
_DEV_SECRET_KEY = "django-insecure-contextlab-dev-key-do-not-use-in-production"
SECRET_KEY_FILE = secret_key_file(os.environ, BASE_DIR)
SECRET_KEY = os.environ.get("SECRET_KEY", "").strip() or read_secret_key_file(SECRET_KEY_FILE) or ""
if not SECRET_KEY and not DEBUG and not {"VAR_DIR", "SECRET_KEY_FILE"} & os.environ.keys():
    SECRET_KEY = read_secret_key_file(ensure_secret_key_file(SECRET_KEY_FILE)) or ""
if not SECRET_KEY and DEBUG:
    SECRET_KEY = _DEV_SECRET_KEY
if not DEBUG and SECRET_KEY in ("", _DEV_SECRET_KEY):
    # A production deployment with the published dev key would let anyone forge sessions.
    raise ImproperlyConfigured(
        "SECRET_KEY must be set to a secret value when DEBUG is False "
        f"(or kept in {SECRET_KEY_FILE}, which `make run` creates)"
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",  # serves Swagger UI from local static files, no CDN
    "template_partials",
    "contextlab.accounts",
    "contextlab.workspaces",
    "contextlab.transcripts",
    "contextlab.runs",
    "contextlab.tuning",
    "contextlab.advice",
    "contextlab.summaries",
    "contextlab.sharing",
    "contextlab.comments",
    "contextlab.search",
    # not a Django app of models: listed so Celery finds its tasks and manage.py its command
    "contextlab.jobs",
]

MIDDLEWARE = [
    # /healthz answers before anything else runs (no host check, no session, no redirect)
    "contextlab.health.HealthCheckMiddleware",
    # a body declared larger than any route takes is refused before anyone waits for it
    "contextlab.middleware.DeclaredBodySizeMiddleware",
    # a body that stalls (no byte for REQUEST_BODY_IDLE_TIMEOUT s) frees its worker: 408
    "contextlab.middleware.BodyIdleTimeoutMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "contextlab.middleware.ContentSecurityPolicyMiddleware",
    "contextlab.middleware.FriendlyErrorPageMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # inside MessageMiddleware: a notice it adds is stored with the response
    "contextlab.middleware.QueueNoticeMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "contextlab.urls"
WSGI_APPLICATION = "contextlab.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "contextlab.context_processors.limits",
            ],
            # django-template-partials as builtins: the same syntax as Django 6's partials.
            "builtins": ["template_partials.templatetags.partials"],
        },
    }
]

_DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}")
DATABASES: dict[str, Any] = {
    "default": dj_database_url.parse(
        _DATABASE_URL, conn_max_age=env_int("CONN_MAX_AGE", 0), conn_health_checks=True
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    if DATABASES["default"]["NAME"] not in ("", ":memory:"):
        Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # The web server and the worker write concurrently: wait for locks instead of failing,
    # and take the write lock up front so transactions never deadlock on upgrade.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "transcripts:list"
LOGOUT_REDIRECT_URL = "accounts:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
]
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
#: Parsed and tokenized sessions, shared by every replay of the same file (all workers on the
#: same disk); safe to delete at any time.
SESSION_CACHE_DIR = Path(env_str("SESSION_CACHE_DIR", str(VAR_DIR / "session-cache")))
#: Serve the hashed, compressed files of ``collectstatic`` (the Docker image). ``make run`` sets
#: it false: whitenoise then serves static/ straight from the source tree, with DEBUG off too.
STATIC_MANIFEST = env_bool("STATIC_MANIFEST", not DEBUG)
WHITENOISE_USE_FINDERS = DEBUG or not STATIC_MANIFEST
# --- storage: every file a worker reads or writes (uploads, parsed sessions, checkpoints) ------
#: ``filesystem`` (MEDIA_ROOT, one disk shared by web and workers: ``make run``) or ``s3``
#: (any S3-compatible object store through django-storages: no two processes share a disk).
STORAGE_BACKEND = env_str("STORAGE_BACKEND", "filesystem").strip().lower()
if STORAGE_BACKEND not in {"filesystem", "s3"}:
    raise ImproperlyConfigured(f"STORAGE_BACKEND must be filesystem or s3, got {STORAGE_BACKEND!r}")
_DEFAULT_STORAGE: dict[str, Any] = (
    {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env_str("S3_BUCKET", "contextlab"),
            "endpoint_url": env_str("S3_ENDPOINT_URL", "") or None,
            "region_name": env_str("S3_REGION", "") or None,
            "access_key": env_str("S3_ACCESS_KEY_ID", "") or None,
            "secret_key": env_str("S3_SECRET_ACCESS_KEY", "") or None,
            # names are content-addressed or owned by one writer: a rewrite replaces the object
            "file_overwrite": True,
            "default_acl": None,
            "querystring_auth": True,
        },
    }
    if STORAGE_BACKEND == "s3"
    else {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        # a parsed session or a checkpoint written again replaces the old one (never "_x1y2")
        "OPTIONS": {"allow_overwrite": True},
    }
)
#: The worker's (and, with ``s3``, the web's) own scratch folder: local copies of stored files
#: that the engine reads by path, and uploads being spooled before they are stored. Never shared.
WORKER_DIR = Path(env_str("WORKER_DIR", str(VAR_DIR / "worker")))
#: Local copies of stored files kept in WORKER_DIR (``s3`` only), least recently used dropped
#: first past this many bytes (a file in use is never dropped).
WORKER_DIR_MAX_BYTES = env_int("WORKER_DIR_MAX_BYTES", 20 * 1024**3, minimum=0)
STORAGES: dict[str, dict[str, Any]] = {
    "default": _DEFAULT_STORAGE,
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if STATIC_MANIFEST
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

# --- results -------------------------------------------------------------------------------
#: A run's result is stored with its requests in parts of at most this many characters of JSON
#: each (``runs.models.RunResultPart``): PostgreSQL holds at most 256 MB in one ``jsonb`` value.
RUN_RESULT_PART_CHARS = env_int("RUN_RESULT_PART_CHARS", 4 * 1024**2, minimum=1)
#: A live session's provisional result is stored in parts of this many requests: an append
#: writes its last part and the new ones, the others are kept (``jobs.lifecycle``).
RUN_RESULT_LIVE_PART_REQUESTS = env_int("RUN_RESULT_LIVE_PART_REQUESTS", 256, minimum=1)

# --- uploads -------------------------------------------------------------------------------
#: Largest accepted transcript upload, bytes (per file). Enforced in the browser and the server.
UPLOAD_MAX_BYTES = env_int("UPLOAD_MAX_BYTES", 5 * 1024**3, minimum=1)
#: Largest piece of a resumable (tus) upload, bytes: one PATCH request's body. A dropped
#: connection costs at most this much sent again.
UPLOAD_CHUNK_MAX_BYTES = env_int("UPLOAD_CHUNK_MAX_BYTES", 64 * 1024**2, minimum=1024)
#: An upload of at least this many bytes is checked (parsed) in a child process, whose memory
#: all goes back to the system before the worker replays it (``transcripts.upload_check``);
#: a smaller one in the process that stores it. 0: never in a child.
UPLOAD_CHECK_CHILD_MIN_BYTES = env_int("UPLOAD_CHECK_CHILD_MIN_BYTES", 64 * 1024**2, minimum=0)
#: Largest body of one append to a live session (``POST /api/sessions/{id}/append``), bytes.
LIVE_APPEND_MAX_BYTES = env_int("LIVE_APPEND_MAX_BYTES", 16 * 1024**2, minimum=1024)
#: A session appended to within this many seconds is live: its report and explorer poll for
#: what the next append brings.
LIVE_SESSION_WINDOW = env_int("LIVE_SESSION_WINDOW", 10 * 60, minimum=1)
#: A live session with no append for this many seconds has ended: its runs continued from
#: an earlier state (provisional) are replayed whole (checked by the periodic recovery).
LIVE_FINAL_AFTER = env_int("LIVE_FINAL_AFTER", 10 * 60, minimum=1)
#: A live session's update goes on from the last replay (its calibration frozen) until the
#: session has this many percent more requests than the calibration was fitted on; the next
#: update then replays it whole and fits again (so provisional estimates drift only so far).
LIVE_REFIT_PERCENT = env_int("LIVE_REFIT_PERCENT", 25, minimum=1)
#: A resumable upload untouched for this many seconds is given up: the periodic recovery
#: removes its pieces, and a client that comes back is told to start again (404).
UPLOAD_RESUMABLE_STALE_AFTER = env_int("UPLOAD_RESUMABLE_STALE_AFTER", 24 * 3600, minimum=1)
# Uploaded files always stream to a temporary file on disk (never held in memory), through the
# size-limit handler first so an oversize body is cut off as soon as it passes the limit.
FILE_UPLOAD_MAX_MEMORY_SIZE = 0
FILE_UPLOAD_HANDLERS = [
    "contextlab.transcripts.uploads.SizeLimitUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
FILE_UPLOAD_TEMP_DIR = env_str("FILE_UPLOAD_TEMP_DIR", "") or None
if FILE_UPLOAD_TEMP_DIR:
    # Django writes there without creating it (docker-compose names one on the shared volume)
    Path(FILE_UPLOAD_TEMP_DIR).mkdir(parents=True, exist_ok=True)
#: A temporary upload file (Django's, in FILE_UPLOAD_TEMP_DIR, or a partial copy under
#: MEDIA_ROOT/uploads) untouched for this many seconds belongs to a request that died (a web
#: process killed mid-upload): the periodic recovery and each web process's start remove it.
#: A live upload writes to its file all the time, so it never gets this old.
UPLOAD_TEMP_STALE_AFTER = env_int("UPLOAD_TEMP_STALE_AFTER", 3600, minimum=1)
#: A session cache file (SESSION_CACHE_DIR, and the object store's copies) neither written nor
#: read for this many seconds is removed by the periodic recovery, unless its session has a
#: run queued or running: copies of sessions since grown, deleted or read by an older engine,
#: and the reading state of live sessions that stopped growing. Costs the next replay a parse.
SESSION_CACHE_STALE_AFTER = env_int("SESSION_CACHE_STALE_AFTER", 7 * 24 * 3600, minimum=1)
#: Under gunicorn, a read of a request's body that waits this many seconds for its next byte
#: fails and the request answers 408 (a client gone mid-upload without closing its connection
#: otherwise holds a web worker until gunicorn's --timeout). Per read: a slow upload that
#: keeps sending goes on. 0: no bound.
REQUEST_BODY_IDLE_TIMEOUT = env_int("REQUEST_BODY_IDLE_TIMEOUT", 60, minimum=0)
# Non-file form fields stay small (the default); files are governed by UPLOAD_MAX_BYTES.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2_621_440)

# --- Celery --------------------------------------------------------------------------------
CELERY_BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    # Embedded broker: messages are files in one folder shared by producer and worker, each
    # written whole before it appears (contextlab/local_broker.py).
    CELERY_BROKER_TRANSPORT = "contextlab.local_broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_DIR / "queue"),
        "control_folder": str(CELERY_BROKER_DIR / "control"),
        "store_processed": False,
        # kombu polls the folder once a second by default: half a second of latency per task
        "polling_interval": 0.05,
    }
    for _folder in ("queue", "control"):
        (CELERY_BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 1800, minimum=1)  # seconds
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 1740, minimum=1)  # seconds
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Redeliver an unacknowledged message only after the hard time limit has surely passed.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": CELERY_TASK_TIME_LIMIT + 600,
        # Redis keeps one list per priority step and workers take from the higher one first:
        # comparison and sweep batches go below uploads and single runs (jobs.tasks), so a
        # big sweep never makes someone else's upload wait behind all of it
        "priority_steps": list(range(10)),
        "sep": ":",
        "queue_order_strategy": "priority",
    }
#: Queue the web side publishes replays to and workers consume (one stack per queue name).
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_TASK_ACKS_LATE = True
#: Redis priority of comparison and sweep batches (0, the default, is taken first): uploads'
#: replays and single runs pass ahead of bulk work queued before them. Other brokers ignore it.
CELERY_TASK_ROUTES = {"contextlab.tuning.tasks.replay_batch": {"priority": 6}}  # jobs.tasks
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True  # run state lives on the Run row, not in a result backend
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Celery's Django fix-up closes every database connection around every task unless this is set
# (it then closes them every N tasks); contextlab.celery applies Django's own rules instead
# (CONN_MAX_AGE, health checks), so a worker keeps its connection like a web process does.
CELERY_DB_REUSE_MAX = 1000

#: A running run whose heartbeat is older than this is considered abandoned, seconds.
RUN_STALE_AFTER = env_int("RUN_STALE_AFTER", 120, minimum=1)
#: How often a running replay refreshes its heartbeat, seconds.
RUN_HEARTBEAT_EVERY = env_int("RUN_HEARTBEAT_EVERY", 10, minimum=1)
#: How many times an abandoned run is requeued before it is marked failed.
RUN_MAX_ATTEMPTS = env_int("RUN_MAX_ATTEMPTS", 2, minimum=1)
#: Seconds between two passes of the periodic recovery (contextlab.jobs.tasks.recover, sent
#: by Celery beat, and once when beat starts): runs whose worker died are requeued, runs whose
#: task was lost or could not be sent are sent again, stale temporary uploads are removed.
#: Half RUN_STALE_AFTER by default, so an abandoned run is requeued within 1.5 × that.
RUN_RECOVER_EVERY = env_int("RUN_RECOVER_EVERY", max(1, RUN_STALE_AFTER // 2), minimum=1)
CELERY_BEAT_SCHEDULE = {
    "recover": {"task": "contextlab.jobs.tasks.recover", "schedule": float(RUN_RECOVER_EVERY)}
}
# The schedule holds one interval task that is safe to run at any time: no state to keep
# between beat restarts, so beat writes no schedule file.
CELERY_BEAT_SCHEDULER = "celery.beat:Scheduler"
#: Days an API token works after it is created (0: never expires); a user revokes tokens on
#: /accounts/tokens/.
API_TOKEN_DAYS = env_int("API_TOKEN_DAYS", 90, minimum=0)

# --- rate limits (contextlab.accounts.throttle) -------------------------------------------
#: Login attempts per client address and per username, sign-ups per address ("N/s|m|h|d").
LOGIN_RATE = env_str("LOGIN_RATE", "20/5m")
LOGIN_USER_RATE = env_str("LOGIN_USER_RATE", "10/5m")
SIGNUP_RATE = env_str("SIGNUP_RATE", "10/h")
#: Comments written or edited per user (pages and API together; contextlab.comments).
COMMENT_RATE = env_str("COMMENT_RATE", "30/5m")
# The counts need a cache every web process shares: Redis when the broker is Redis (compose,
# production), else this process's memory (the single-process dev server). A Redis that does not
# answer is a cache miss, never a 500 (contextlab/resilient_cache.py): pages rebuild what they
# cached, and the limits fail open (RATELIMIT_FAIL_OPEN) rather than lock everyone out.
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CACHES = {
        "default": {
            "BACKEND": "contextlab.resilient_cache.ResilientRedisCache",
            "LOCATION": env_str("CACHE_URL", CELERY_BROKER_URL),
            "KEY_PREFIX": "contextlab",
            # a Redis that hangs must not hang the page: give up after these many seconds
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 1.0},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
RATELIMIT_FAIL_OPEN = True
# The client address the limits count by: REMOTE_ADDR, or behind a proxy the header it sets
# (RATELIMIT_IP_META_KEY=HTTP_X_FORWARDED_FOR), read by contextlab.http.client_address.
CLIENT_ADDRESS_META_KEY = env_str("RATELIMIT_IP_META_KEY", "REMOTE_ADDR")
RATELIMIT_IP_META_KEY = "contextlab.http.client_address"

#: A run still queued after this many seconds is sent to the workers again (its task may have
#: been lost: a dropped message, a frozen pool); a duplicate message is a no-op.
#: Most runs one user may have queued or running at once (what-if, comparison and sweep runs;
#: an upload's recorded replay is never refused): past it, creating more answers a message.
RUN_MAX_ACTIVE_PER_USER = env_int("RUN_MAX_ACTIVE_PER_USER", 500, minimum=1)
#: Upload quotas, counted over stored sessions (0: no limit). Per user: all they uploaded;
#: per workspace: everything in it, whoever uploaded it.
UPLOAD_QUOTA_USER_FILES = env_int("UPLOAD_QUOTA_USER_FILES", 5000, minimum=0)
UPLOAD_QUOTA_USER_BYTES = env_int("UPLOAD_QUOTA_USER_BYTES", 20 * 1024**3, minimum=0)
UPLOAD_QUOTA_WORKSPACE_FILES = env_int("UPLOAD_QUOTA_WORKSPACE_FILES", 20000, minimum=0)
UPLOAD_QUOTA_WORKSPACE_BYTES = env_int("UPLOAD_QUOTA_WORKSPACE_BYTES", 100 * 1024**3, minimum=0)
RUN_QUEUED_RESEND_AFTER = env_int("RUN_QUEUED_RESEND_AFTER", 900, minimum=10)

# --- pages ---------------------------------------------------------------------------------
#: Rows of the request explorer rendered per page (the rest arrive with "load more").
EXPLORER_ROWS_PER_PAGE = env_int("EXPLORER_ROWS_PER_PAGE", 60, minimum=10)
#: Charts keep at most this many points per series (plus every compaction point).
CHART_MAX_POINTS = env_int("CHART_MAX_POINTS", 1500, minimum=50)

# --- security ------------------------------------------------------------------------------
#: The site is reached over HTTPS (directly or through a TLS-terminating proxy; behind a proxy
#: set SECURE_PROXY_SSL too). Turns on secure cookies, the redirect to HTTPS and HSTS.
HTTPS = env_bool("HTTPS", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", HTTPS)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
# container health probes speak plain HTTP to the web process itself
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
#: Strict-Transport-Security max-age, seconds (sent on HTTPS responses only); 1 year with HTTPS.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
#: Asking browsers to preload HSTS is a commitment only the domain's owner can make: opt-in,
#: and its deploy-check warning (W021) is silenced while it is off.
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if env_bool("SECURE_PROXY_SSL", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CONTENT_SECURITY_POLICY = env_str(
    "CONTENT_SECURITY_POLICY",
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
)
#: Features no page uses, denied to every frame.
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"
CSRF_FAILURE_VIEW = "contextlab.errors.csrf_failure"

#: The worker touches this file every WORKER_HEARTBEAT_EVERY seconds;
#: ``manage.py check_worker`` (docker-compose's worker health check) fails once it is older
#: than WORKER_HEARTBEAT_STALE_AFTER seconds.
WORKER_HEARTBEAT_FILE = Path(
    env_str(
        "WORKER_HEARTBEAT_FILE", str(Path(tempfile.gettempdir()) / "contextlab-worker-heartbeat")
    )
)
WORKER_HEARTBEAT_EVERY = env_int("WORKER_HEARTBEAT_EVERY", 15, minimum=1)
WORKER_HEARTBEAT_STALE_AFTER = env_int("WORKER_HEARTBEAT_STALE_AFTER", 90, minimum=1)

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}
