"""The default cache on Redis, degrading instead of failing when Redis does not answer.

Everything the web side keeps in the cache can be lost: page fragments and facts are rebuilt
from the database, and rate-limit counts are not counted while Redis is away
(``RATELIMIT_FAIL_OPEN``: the limits fail open, so login, share links and comments keep
working; the only cost is that a guesser is not slowed during the outage). So a cache error is
a miss, never a 500: reads answer their default, writes answer False, ``incr`` answers None
(django-ratelimit then applies ``RATELIMIT_FAIL_OPEN``). The first error of each minute is
logged, so an outage shows in the logs without flooding them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

log = logging.getLogger(__name__)
T = TypeVar("T")

#: seconds between two logged cache errors
LOG_EVERY = 60.0


class ResilientRedisCache(RedisCache):
    """Django's Redis cache whose operations answer a miss when Redis fails."""

    _last_logged = 0.0

    def _degrade(self, fallback: T, method: Callable[..., T], *args: Any) -> T:
        """``method(self, *args)``, or ``fallback`` when Redis fails."""
        try:
            return method(self, *args)
        except (RedisError, OSError) as error:
            now = time.monotonic()
            if now - ResilientRedisCache._last_logged >= LOG_EVERY:
                ResilientRedisCache._last_logged = now
                log.warning("cache %s failed, answering a miss: %s", method.__name__, error)
            return fallback

    def add(
        self, key: Any, value: Any, timeout: float | None = DEFAULT_TIMEOUT, version: Any = None
    ) -> bool:
        return self._degrade(False, RedisCache.add, key, value, timeout, version)

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        return self._degrade(default, RedisCache.get, key, default, version)

    def set(
        self, key: Any, value: Any, timeout: float | None = DEFAULT_TIMEOUT, version: Any = None
    ) -> None:
        self._degrade(None, RedisCache.set, key, value, timeout, version)

    def touch(self, key: Any, timeout: float | None = DEFAULT_TIMEOUT, version: Any = None) -> bool:
        return self._degrade(False, RedisCache.touch, key, timeout, version)

    def delete(self, key: Any, version: Any = None) -> bool:
        return self._degrade(False, RedisCache.delete, key, version)

    def get_many(self, keys: Iterable[Any], version: Any = None) -> dict[Any, Any]:
        return self._degrade({}, RedisCache.get_many, keys, version)

    def has_key(self, key: Any, version: Any = None) -> bool:
        return self._degrade(False, RedisCache.has_key, key, version)

    def incr(self, key: Any, delta: int = 1, version: Any = None) -> Any:
        # None, not an exception: django-ratelimit reads it as "the count failed"
        return self._degrade(None, RedisCache.incr, key, delta, version)

    def set_many(
        self, data: dict[Any, Any], timeout: float | None = DEFAULT_TIMEOUT, version: Any = None
    ) -> list[Any]:
        return self._degrade(list(data), RedisCache.set_many, data, timeout, version)

    def delete_many(self, keys: Iterable[Any], version: Any = None) -> None:
        self._degrade(None, RedisCache.delete_many, keys, version)

    def clear(self) -> None:
        self._degrade(None, RedisCache.clear)
