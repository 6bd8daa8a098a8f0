/* tg.map's per-item loop (taskgraph/_map.py): fn called on a block of items, each result
 * stored in place in the map's output list. */
#ifndef TG_PY_MAPBLOCK_H
#define TG_PY_MAPBLOCK_H

#include "state.h"

/* core.map_into(fn, src, src_start, out, out_start, count, star) -> (done, error).
 * Calls fn on `count` items of src and stores result j in out[out_start + j] (out: a list made
 * by the caller, at least out_start + count long, whose slots the caller does not share with
 * anyone else while this runs; each slot is written once). src: a list (items src_start...,
 * read with a strong reference: a list that shrinks meanwhile ends the block early), a tuple
 * or a range (items src_start...), or an iterator (its next `count` items; src_start unused;
 * an iterator that ends ends the block early). star: each item is a tuple of fn's arguments.
 * Returns how many items were done and None, or, when fn (or src) raised an Exception at
 * item `done`, that exception object: it is returned, not raised, so that StopIteration from
 * fn stays fn's error (builtins.map would end early on it). A BaseException that is not an
 * Exception (KeyboardInterrupt, SystemExit) is raised. */
PyObject *tg_map_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
