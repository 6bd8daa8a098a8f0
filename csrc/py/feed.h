/* LiveFeed (feed.c): the reader of an engine's live feeds, for the dashboard
 * (taskgraph/dashboard/feed.py). It attaches a feed to each worker's watch, takes the
 * records out of the rings and sums them up in C (counts per task name, the task stream in
 * time buckets with the long tasks listed one by one), and samples what the workers show
 * now (running tasks, idle time, queue lengths). Layer 9 (docs/design/native.md): above
 * engine. */
#ifndef TG_PY_FEED_H
#define TG_PY_FEED_H

#include "engine.h"

extern PyTypeObject TG_LiveFeedType;

#endif
