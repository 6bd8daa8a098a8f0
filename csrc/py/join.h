/* Spawning and joining from inside a running task (join.c): what Task calls and Node's
 * result() waits with on a worker. Layer 9 (docs/design/native.md): above the engine (a join
 * refuses a node of an engine made before fork()). */
#ifndef TG_PY_JOIN_H
#define TG_PY_JOIN_H

#include "engine.h"

/* Pushes a node built inside a running task onto W's deque (or submits it with its edges). */
int tg_spawn(Runner *W, NodeObject *n);
/* result()/exception() inside a worker of the node's engine: 0 when it finished, -1 with an
 * error (own node, awaiting an ancestor, the pool shut down). */
int tg_join(Runner *W, NodeObject *n);

#endif
