"""``await node``: Node.__await__ (csrc/py/callbacks.c) delegates here. The event loop is never
blocked: a lazy node is started on the current scheduler, and its completion comes back
through ``loop.call_soon_threadsafe`` from the thread that finishes it."""
from __future__ import annotations

import asyncio

from taskgraph._native import core
from taskgraph.executor.nowait import submit_nowait
from taskgraph.errors import TaskgraphError

__all__ = ["wait_node"]


async def wait_node(node):
    """The coroutine behind ``await node``: the node's value, or its exception raised (as
    ``node.result()``). Cancelling the await (``asyncio.wait_for``, ``asyncio.timeout``,
    ``task.cancel()``) cancels the node (``node.cancel()``; wrap it in ``asyncio.shield`` to
    keep it going). Inside a task: ``TaskgraphError``."""
    if core._in_task():
        raise TaskgraphError(
            f"await of node {node.key} inside a task: a task runs on a worker thread, which "
            "cannot help other tasks while an event loop waits there; call node.result() "
            "instead (inside a task it joins)")
    loop = asyncio.get_running_loop()
    if not node.done():
        submit_nowait([node])  # in serial mode: runs it now
    if not node.done():
        woken = loop.create_future()

        def on_done(_node):  # on the thread that finished the node
            try:
                loop.call_soon_threadsafe(_wake, woken)
            except RuntimeError:  # the loop was closed meanwhile: nobody waits any more
                pass

        node.add_done_callback(on_done)
        try:
            await woken
        except BaseException:
            node.remove_done_callback(on_done)
            if not node.done():
                node.cancel()
            raise
    return node.result()


def _wake(fut):
    if not fut.done():
        fut.set_result(None)
