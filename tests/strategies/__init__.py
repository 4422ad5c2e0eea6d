"""Hypothesis strategies for the boundary objects, one module per concern.

Three families, each driven by the contract's own metadata rather than by lists kept here:

* :mod:`strategies.valid`: valid cases over the whole space, laid out by
  :mod:`strategies.cases` (backends, id dtypes, memory layouts);
* :mod:`strategies.mutations`: changes that break exactly one rule of
  :data:`specguard.contracts.REGISTRY` each;
* :mod:`strategies.hostile`: the wrong types, dtypes, ranks, backends and devices for a
  field.

:mod:`strategies.workloads` draws small workloads for the reference engine.
"""
