"""WSGI entry point (gunicorn contextlab.wsgi; ``runserver`` loads it too)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextlab.settings")

application = get_wsgi_application()

# A web process starting may follow one killed mid-upload: its temporary files go now (the
# periodic recovery removes them too, for a process that is killed while others serve on).
from contextlab.jobs import uploads  # noqa: E402  (needs the settings configured above)

uploads.remove_stale_temp_files()
