"""One background asyncio loop for the whole dashboard process.

Pages hand coroutines to it and watch their results or event queues; a page rerun never kills the
work. The loop is created lazily (never at import time) and held by `st.cache_resource` in
`dashboard.state`, so there is one per process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="judgelab-loop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return self.submit(coro).result(timeout)

    def iterate(self, agen: AsyncIterator[T], timeout: float = 600.0) -> Iterator[T]:
        """Consume an async iterator on the loop from a synchronous caller (e.g. st.write_stream)."""
        items: queue.Queue[tuple[str, Any]] = queue.Queue()

        async def pump() -> None:
            try:
                async for item in agen:
                    items.put(("item", item))
            except BaseException as exc:  # handed to the consumer thread and raised there
                items.put(("error", exc))
            else:
                items.put(("end", None))

        self.submit(pump())
        while True:
            kind, value = items.get(timeout=timeout)
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
