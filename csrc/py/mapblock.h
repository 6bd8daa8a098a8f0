/* tg.map's per-item loop (taskgraph/_map.py): fn called on a block of items, each result
 * stored in place in the map's output list. */
#ifndef TG_PY_MAPBLOCK_H
#define TG_PY_MAPBLOCK_H

#include "state.h"

/* core.map_into(fn, src, src_start, out, out_start, count, star, owner) -> (done, error).
 * Calls fn on `count` items of src and stores result j in out[out_start + j] (out: a list made
 * by the caller, at least out_start + count long, whose slots the caller does not share with
 * anyone else while this runs; each slot is written once). src: a list (items src_start...,
 * read with a strong reference: a list that shrinks meanwhile ends the block early), a tuple
 * or a range (items src_start...), or an iterator (its next `count` items; src_start unused;
 * an iterator that ends ends the block early). star: each item is a tuple of fn's arguments.
 * Returns how many items were done and None, or, when fn (or src) raised an Exception at
 * item `done`, that exception object: it is returned, not raised, so that StopIteration from
 * fn stays fn's error (builtins.map would end early on it). A BaseException that is not an
 * Exception (KeyboardInterrupt, SystemExit) is raised. owner: map_owner() of the thread
 * that will read out (the map's caller), to which the results are handed over (mapblock.c,
 * hand_over), or 0. */
PyObject *tg_map_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* core.map_owner() -> the calling thread's id as map_into's `owner` wants it (0 where results
 * need no handing over: builds with a GIL). */
PyObject *tg_map_owner(PyObject *self, PyObject *unused);
/* core._owned_here(obj) -> whether obj is owned by the calling thread (a mortal object whose
 * local reference count is this thread's), None on builds with a GIL. Tests only. */
PyObject *tg_owned_here(PyObject *self, PyObject *obj);

#endif
