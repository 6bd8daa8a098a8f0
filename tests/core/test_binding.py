"""The test-only binding's declarations come from the headers: every function the core
defines for other files is declared there, and so reaches the binding."""
import os
import re

import _binding


def test_every_exported_core_function_is_in_the_generated_declarations():
    cdef = _binding.cdef_from_headers()
    declared = set(re.findall(r"\b(tg_\w+)\s*\(", cdef))
    defined = set()
    for src in _binding.SOURCES:
        with open(os.path.join(_binding.CSRC, src)) as f:
            text = f.read()
        # Definitions at the start of a line, not static: visible to other files.
        defined |= {m.group(2) for m in re.finditer(r"^(?!static)([\w \*]+?)\b(tg_\w+)\s*\([^;]*?\)\s*\{",
                                                    text, flags=re.M)}
    assert defined, "found no function definitions in the core's sources"
    assert defined <= declared, f"defined but not declared in a header: {sorted(defined - declared)}"


def test_structs_with_atomic_members_are_declared_partially():
    cdef = _binding.cdef_from_headers()
    assert "_Atomic" not in cdef
    assert re.search(r"typedef struct tg_task \{[^}]*\.\.\.; \} tg_task;", cdef)
