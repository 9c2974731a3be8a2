# One image for the web and worker services of docker-compose.yml.
FROM python:3.11-slim AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 1000 contextlab
WORKDIR /app

# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml README.md ./
COPY contextlab/__init__.py contextlab/__init__.py
COPY contextlab/engine contextlab/engine
RUN pip install .

COPY . .
RUN pip install --no-deps . \
    && DEBUG=false SECRET_KEY=collectstatic-only VAR_DIR=/tmp/build python manage.py collectstatic --noinput \
    && mkdir -p /data && chown contextlab:contextlab /data

USER contextlab
ENV VAR_DIR=/data \
    MEDIA_ROOT=/data/media \
    DEBUG=false \
    PORT=8000
EXPOSE 8000

# web by default; the worker service overrides the command
CMD ["sh", "-c", "gunicorn contextlab.wsgi --bind 0.0.0.0:${PORT} --workers ${WEB_CONCURRENCY:-2} --timeout 300 --access-logfile -"]

# the web service's probe (docker-compose.yml overrides it for the worker)
HEALTHCHECK --interval=15s --timeout=10s --start-period=20s --retries=5 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=5)"]
