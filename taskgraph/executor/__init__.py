"""taskgraph for code written against ``concurrent.futures`` and ``asyncio``. ``Executor``
(executor) is a ``concurrent.futures.Executor`` on the work-stealing scheduler; ``submit``
returns its ``Future`` (future), and ``map`` runs the calls in ``tg.map``'s range tasks (map).
Nodes are futures too: ``tg.wait`` and ``tg.as_completed`` (wait) and ``await node`` (aio)
start a lazy node without blocking (nowait) and are woken by its done callbacks."""
from taskgraph.executor.executor import Executor
from taskgraph.executor.future import Future

__all__ = ["Executor", "Future"]
