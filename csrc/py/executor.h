/* The native half of taskgraph.Executor (executor.c): its work item, and the way one call
 * goes onto the pool (spawned inside one of the executor's tasks, injected from anywhere
 * else). Layer 12 (docs/design/native.md), beside task: above node. */
#ifndef TG_PY_EXECUTOR_H
#define TG_PY_EXECUTOR_H

#include "execfuture.h"
#include "node.h"

/* The work item type (private: taskgraph._core.ExecItem). */
extern PyTypeObject TG_ExecItemType;
/* The module functions of this file (added by module.c): _exec_configure (which installs
 * Future.result and Executor.submit), _exec_exiting, _exec_hold, _exec_release. */
extern PyMethodDef tg_executor_methods[];
/* Makes the interned method names this file calls; -1 with an error. */
int tg_executor_init(void);

#endif
