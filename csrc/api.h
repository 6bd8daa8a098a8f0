/* TG_API marks the functions of the C core that the cffi face binds (taskgraph/_native.py,
 * ABI mode over the extension's own shared object): they keep default visibility while the
 * extension is built with -fvisibility=hidden. No Python here. */
#ifndef TG_API_H
#define TG_API_H
#define TG_API __attribute__((visibility("default")))
#endif
