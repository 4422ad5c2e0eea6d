"""specguard's cost, measured against what it replaces.

``specguard bench`` times the full validation of a decode batch against the fastest
hand-written numpy check of the same rules (:mod:`specguard.benchmarks.floor`) and against the
obvious jaxtyping + beartype + pydantic version (:mod:`specguard.benchmarks.naive`), all in one
run, and shows that a disabled guard is the undecorated function itself.
"""
