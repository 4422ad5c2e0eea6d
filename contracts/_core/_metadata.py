"""Metadata checks: field types, dtypes, ranks, shared dimensions, one backend and device.

Two implementations of the same spec. :func:`compile_fast_check` generates, once per
class, a straight-line function that answers only "all good?" with no allocation and no
dictionary work: it is what runs on every hand-over. When it says no, the interpreted
:func:`metadata_findings` walks the same specs again and explains every failure.
Hypothesis tests hold the two to the same verdict.

The generated source is registered with :mod:`linecache` under a name of its own, as
attrs does for the methods it writes: ``inspect.getsource`` shows it, a traceback through
it shows the line, and pdb can list and step through it.
"""

from __future__ import annotations

import contextlib
import linecache
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from specguard.contracts._core._arrays import (
    array_kind,
    describe,
    dtype_name,
    int_text,
    torch_module,
)
from specguard.contracts._core._dims import dimension
from specguard.contracts._core._fields import ArrayField, AxisSpec, FieldSpec, ScalarField
from specguard.contracts._core._violation import Finding

__all__ = ["MetadataFinding", "compile_fast_check", "metadata_findings", "register_source"]

MetadataFinding = tuple[str, Finding]

_DTYPE_SETS: list[tuple[set[Any], frozenset[str]]] = []
# The globals of every generated check: torch's names are filled in once it shows up.
_NAMESPACES: list[dict[str, Any]] = []
_torch_registered = False
#: How many sources were generated per kind and class name (a redefined class gets a new
#: source).
_GENERATED: dict[str, int] = {}


def _dtype_set(names: frozenset[str]) -> set[Any]:
    """numpy dtypes now; torch's are added the first time a tensor is seen."""
    allowed: set[Any] = set()
    for name in names:
        with contextlib.suppress(TypeError):
            allowed.add(np.dtype(name))
    _DTYPE_SETS.append((allowed, names))
    if _torch_registered:
        _add_torch_dtypes(allowed, names)
    return allowed


def _add_torch_dtypes(allowed: set[Any], names: frozenset[str]) -> None:
    torch = torch_module()
    for name in names:
        dtype = getattr(torch, name, None)
        if dtype is not None and isinstance(dtype, torch.dtype):
            allowed.add(dtype)


def _is_tensor_type(kind: type) -> bool:
    global _torch_registered
    torch = torch_module()
    if torch is None or not issubclass(kind, torch.Tensor):
        return False
    if not _torch_registered:
        _torch_registered = True
        for allowed, names in _DTYPE_SETS:
            _add_torch_dtypes(allowed, names)
        for namespace in _NAMESPACES:
            namespace["strided"] = torch.strided
            namespace["tensor"] = torch.Tensor
    return True


class _NoTensorYet:
    """What the generated checks compare array types with until torch shows up: a
    class no array is an instance of."""


def _is_int(value: object) -> bool:
    # Any size: a scalar past int64 is an int out of its range (SG006), not a wrong type.
    return type(value) is int or isinstance(value, np.integer)


class _Source:
    """Accumulates the generated function's lines with indentation."""

    def __init__(self, namespace: dict[str, Any], name: str = "fast_check", *,
                 backend_state: bool = True) -> None:
        self.namespace = namespace
        self.lines = [f"def {name}(obj):"]
        if backend_state:
            self.lines += ["    K = None", "    dev = None", "    cpu = False"]
        self.maybe_bound: set[str] = set()
        #: The field whose array type picks the backend (numpy-only body; None: up front).
        self.dispatch_field: str | None = None

    def add(self, line: str, depth: int = 1) -> None:
        self.lines.append("    " * depth + line)


def _scalar_lines(src: _Source, spec: ScalarField, bound: set[str]) -> None:
    src.add(f"v = obj.{spec.name}")
    depth = 1
    if spec.optional:
        src.add("if v is not None:")
        depth = 2
    if spec.type is bool:
        src.add("if type(v) is not bool: return False", depth)
        return
    # The common case inline (a call per scalar is a measurable share of a hand-over).
    src.add("if type(v) is not int and not is_int(v): return False", depth)
    if spec.minimum is not None:
        src.add(f"if v < {spec.minimum}: return False", depth)
    if spec.maximum is not None:
        src.add(f"if v > {spec.maximum}: return False", depth)
    if spec.binds and not spec.optional:
        src.add(f"d_{spec.name} = v", depth)
        bound.add(spec.name)


def _axis_lines(src: _Source, axis: AxisSpec, length: str, bound: set[str], depth: int) -> None:
    """One axis whose length is the expression ``length``: compare, or bind its name."""
    if axis.name is None:
        src.add(f"if {length} != {axis.size}: return False", depth)
        return
    if axis.name in bound:
        # The offset comes off the shape (a Python int): added to a bound numpy int8
        # mtp_k of 127 it would wrap.
        shifted = f"{length} - ({axis.offset})" if axis.offset else length
        src.add(f"if {shifted} != d_{axis.name}: return False", depth)
        return
    value = f"{length} - {axis.offset}" if axis.offset else length
    negative = f"if d_{axis.name} < 0: return False" if axis.offset else None
    if axis.name in src.maybe_bound:
        # Possibly bound by an optional field that was present: bind or compare.
        src.add(f"if d_{axis.name} is None:", depth)
        src.add(f"d_{axis.name} = {value}", depth + 1)
        if negative:
            src.add(negative, depth + 1)
        src.add(f"elif {value} != d_{axis.name}: return False", depth)
    else:
        src.add(f"d_{axis.name} = {value}", depth)
        if negative:
            src.add(negative, depth)
    if depth == 1:
        bound.add(axis.name)


def _array_lines(src: _Source, spec: ArrayField, index: int, bound: set[str]) -> None:
    src.add(f"a = obj.{spec.name}")
    depth = 1
    if spec.optional:
        src.add("if a is not None:")
        depth = 2
    src.add("if K is None:", depth)
    src.add("K = type(a)", depth + 1)
    src.add("if K is ndarray: pass", depth + 1)
    # torch.Tensor itself by identity (filled in once torch shows up), a subclass by a call.
    src.add("elif K is tensor or is_tensor_type(K):", depth + 1)
    # A CPU tensor says so in one attribute read: the later fields' device is that flag,
    # not a device object built and compared per field (``dev`` only marks it as set).
    src.add("cpu = a.is_cpu", depth + 2)
    src.add("dev = True if cpu else a.device", depth + 2)
    # Sparse tensors share the dense type; only their layout tells them apart.
    src.add("if a.layout is not strided: return False", depth + 2)
    src.add("else: return False", depth + 1)
    src.add("elif type(a) is not K: return False", depth)
    src.add("elif dev is not None and ((not a.is_cpu if cpu else a.device != dev) "
            "or a.layout is not strided): return False", depth)
    src.add(f"if a.dtype not in allowed_{index}: return False", depth)
    _shape_lines(src, spec, bound, depth)


def _numpy_array_lines(src: _Source, spec: ArrayField, index: int, bound: set[str]) -> None:
    """An array field when every array is a numpy array: no backend or device to track.

    The commonest dtypes are compared by identity before the set lookup, and a
    one-axis array's length is ``len(a)``: no shape tuple is built. The always-on
    hand-over pays these few bytecodes per field and nothing else.
    """
    src.add(f"a = obj.{spec.name}")
    depth = 1
    if spec.optional:
        src.add("if a is not None:")
        depth = 2
    otherwise = "general_check(obj)" if spec.name == src.dispatch_field else "False"
    src.add(f"if type(a) is not ndarray: return {otherwise}", depth)
    src.add("t = a.dtype", depth)
    same = "".join(f"t is not {name} and " for name in _identity_names(src, index))
    src.add(f"if {same}t not in allowed_{index}: return False", depth)
    rank = len(spec.axes)
    src.add(f"if a.ndim != {rank}: return False", depth)
    if rank == 1:
        _axis_lines(src, spec.axes[0], "len(a)", bound, depth)
        return
    if rank:
        src.add("s = a.shape", depth)
    for j, axis in enumerate(spec.axes):
        _axis_lines(src, axis, f"s[{j}]", bound, depth)


def _identity_names(src: _Source, index: int) -> list[str]:
    """Names (bound in the generated namespace) of field ``index``'s numpy dtypes."""
    names = []
    for j, dtype in enumerate(sorted(src.namespace[f"allowed_{index}"], key=str)):
        if isinstance(dtype, np.dtype):
            names.append(f"dtype_{index}_{j}")
            src.namespace[names[-1]] = dtype
    return names


def _shape_lines(src: _Source, spec: ArrayField, bound: set[str], depth: int) -> None:
    """The rank and every axis of array ``a``, binding or comparing named dimensions."""
    src.add("s = a.shape", depth)
    src.add(f"if len(s) != {len(spec.axes)}: return False", depth)
    for j, axis in enumerate(spec.axes):
        _axis_lines(src, axis, f"s[{j}]", bound, depth)


def _body(src: _Source, fields: Sequence[FieldSpec], optional_dims: set[str],
          array_lines: Callable[[_Source, ArrayField, int, set[str]], None]) -> None:
    bound: set[str] = set()
    for name in sorted(optional_dims):
        src.add(f"d_{name} = None")
    src.maybe_bound = optional_dims
    for i, spec in enumerate(fields):
        if isinstance(spec, ScalarField):
            _scalar_lines(src, spec, bound)
        else:
            array_lines(src, spec, i, bound)
    src.add("return True")


def _first_seen_in_optional(fields: Sequence[FieldSpec]) -> set[str]:
    """Dimensions an optional field may bind before any required field does: only these
    are 'bound or not' at run time; every other one is bound where first seen."""
    bound: set[str] = set()
    maybe: set[str] = set()
    for spec in fields:
        if isinstance(spec, ScalarField):
            if spec.binds and not spec.optional:
                bound.add(spec.name)
            continue
        for axis in spec.axes:
            if axis.name and axis.name not in bound:
                (maybe if spec.optional else bound).add(axis.name)
    return maybe


def _only_scalars_before(fields: Sequence[FieldSpec], name: str) -> bool:
    for spec in fields:
        if spec.name == name:
            return True
        if isinstance(spec, ArrayField):
            return False
    return False


def compile_fast_check(fields: Sequence[FieldSpec], owner: str) -> Callable[[Any], bool]:
    """Generate the class's all-good predicate from its field specs.

    Two functions are generated: ``general_check`` for any backend, and ``fast_check``,
    which hands over to it unless the first required array is a numpy array, and then
    checks every array as a numpy array (no backend or device bookkeeping per field: the
    always-on hand-over of host batches pays for none).
    """
    namespace: dict[str, Any] = {
        "ndarray": np.ndarray,
        "is_tensor_type": _is_tensor_type,
        "is_int": _is_int,
        "strided": torch_module().strided if _torch_registered else None,
        "tensor": torch_module().Tensor if _torch_registered else _NoTensorYet,
    }
    _NAMESPACES.append(namespace)
    optional_dims = _first_seen_in_optional(fields)
    for i, spec in enumerate(fields):
        if isinstance(spec, ArrayField):
            namespace[f"allowed_{i}"] = _dtype_set(spec.dtypes)
    general = _Source(namespace, "general_check")
    _body(general, fields, optional_dims, _array_lines)
    lines = general.lines
    first = next((spec.name for spec in fields
                  if isinstance(spec, ArrayField) and not spec.optional), None)
    if first is not None:
        numpy_only = _Source(namespace, backend_state=False)
        if _only_scalars_before(fields, first):
            numpy_only.dispatch_field = first  # decided where the field is read anyway
        else:
            numpy_only.add(f"if type(obj.{first}) is not ndarray: return general_check(obj)")
        _body(numpy_only, fields, optional_dims, _numpy_array_lines)
        lines = lines + numpy_only.lines
    else:
        lines = [*lines, "fast_check = general_check"]
    code = compile("\n".join(lines), register_source(owner, lines), "exec")
    exec(code, namespace)
    check: Callable[[Any], bool] = namespace["fast_check"]
    return check


def register_source(owner: str, lines: Sequence[str], what: str = "metadata check") -> str:
    """Put generated ``lines`` (``what`` of class ``owner``) in linecache under a unique
    name; return the name.

    The entry has no modification time, so ``linecache.checkcache`` (which tracebacks
    call) keeps it: there is no file for it to go stale against.
    """
    key = f"{what} {owner}"
    count = _GENERATED[key] = _GENERATED.get(key, 0) + 1
    suffix = "" if count == 1 else f" #{count}"
    filename = f"<specguard generated {key}{suffix}>"
    text = [line + "\n" for line in lines]
    linecache.cache[filename] = (sum(map(len, text)), None, text, filename)
    return filename


class _Walk:
    """State of one interpreted pass: bindings, the backend and device seen first."""

    def __init__(self, obj: Any, subject: str) -> None:
        self.obj = obj
        self.subject = subject
        self.bindings: dict[str, int] = {}
        self.kind: str | None = None
        self.device: Any = None
        self.first_array: str | None = None
        self.findings: list[MetadataFinding] = []

    def fail(self, code: str, finding: Finding) -> None:
        self.findings.append((code, finding))


def _check_scalar(walk: _Walk, spec: ScalarField, value: object) -> None:
    if value is None and spec.optional:
        return
    wanted = "bool" if spec.type is bool else "int"
    is_right_type = type(value) is bool if spec.type is bool else _is_int(value)
    if not is_right_type:
        walk.fail("SG001", Finding(f"expected {wanted}, got {describe(value)}", spec.name,
                                   expected=wanted, actual=type(value).__name__))
        return
    number = int(value)  # type: ignore[call-overload]
    if spec.minimum is not None and number < spec.minimum:
        walk.fail("SG006", Finding(f"must be >= {spec.minimum}, got {int_text(number)}",
                                   spec.name, expected=f">= {spec.minimum}",
                                   actual=int_text(number)))
        return
    if spec.maximum is not None and number > spec.maximum:
        walk.fail("SG006", Finding(f"must be <= {spec.maximum}, got {int_text(number)}",
                                   spec.name, expected=f"<= {spec.maximum}",
                                   actual=int_text(number)))
        return
    if spec.binds:
        walk.bindings[spec.name] = int(value)  # type: ignore[call-overload]


def _check_backend(walk: _Walk, spec: ArrayField, value: Any, kind: str) -> bool:
    device = value.device if kind == "torch" else None
    if walk.kind is None:
        walk.kind, walk.device, walk.first_array = kind, device, spec.name
        return True
    if kind != walk.kind or device != walk.device:
        where = f"{walk.kind}" + (f" on {walk.device}" if walk.device is not None else "")
        here = f"{kind}" + (f" on {device}" if device is not None else "")
        walk.fail("SG005", Finding(
            f"all arrays of one object share a backend and device; {walk.first_array} is "
            f"{where} but {spec.name} is {here}", spec.name, expected=where, actual=here))
        return False
    return True


def _check_axes(walk: _Walk, spec: ArrayField, value: Any) -> None:
    shape = tuple(int(n) for n in value.shape)
    if len(shape) != len(spec.axes):
        walk.fail("SG003", Finding(
            f"expected {len(spec.axes)} axes {spec.shape_text}, got {describe(value)}",
            spec.name, expected=spec.shape_text, actual=describe(value)))
        return
    for axis, length in zip(spec.axes, shape, strict=True):
        expected = axis.expected(walk.bindings)
        if expected is None:
            assert axis.name is not None
            if length - axis.offset < 0:
                walk.fail("SG003", Finding(
                    f"axis {axis} has length {length}, too short for its offset", spec.name,
                    expected=str(axis), actual=describe(value)))
                return
            walk.bindings[axis.name] = length - axis.offset
        elif expected != length:
            _dimension_mismatch(walk, spec, value, axis, expected, length)
            return


def _dimension_mismatch(
    walk: _Walk, spec: ArrayField, value: Any, axis: AxisSpec, expected: int, length: int
) -> None:
    dim = dimension(axis.name) if axis.name else None
    code = dim.rule if dim else "SG003"
    reason = f"{spec.name} is {describe(value)} but {axis}={int_text(expected)}"
    finding = Finding(reason, spec.name, expected=f"{axis}={int_text(expected)}",
                      actual=str(length))
    locate = getattr(walk.obj, "_sg_locate_missing", None)
    if axis.name and locate is not None and length < expected:
        try:
            where = locate(axis.name, length)
        except Exception:  # locating is a courtesy; the mismatch is reported either way
            where = None
        if where is not None:
            position, seq_id, detail = where
            finding = Finding(f"{detail}: {reason}", spec.name, position=position,
                              seq_id=seq_id, expected=finding.expected, actual=finding.actual)
    walk.fail(code, finding)


def _check_array(walk: _Walk, spec: ArrayField, value: Any) -> None:
    if value is None:
        if not spec.optional:
            walk.fail("SG001", Finding("is required, got None", spec.name,
                                       expected="array", actual="None"))
        return
    kind = array_kind(value)
    if kind is None:
        walk.fail("SG001", Finding(
            f"expected a numpy array or torch tensor, got {describe(value)}", spec.name,
            expected="numpy.ndarray | torch.Tensor", actual=type(value).__name__))
        return
    if not _check_backend(walk, spec, value, kind):
        return
    name = dtype_name(value)
    if name not in spec.dtypes:
        allowed = "|".join(sorted(spec.dtypes))
        reason = f"expected dtype {allowed}, got {describe(value)}"
        native = _native_name(value)
        if native is not None and native in spec.dtypes:
            # The values are right and the width too: the byte order is what differs.
            reason += (f": it is {native} in the other byte order ({name}); the checks and "
                       f"the engines read native-endian arrays (use .astype('{native}'))")
        walk.fail("SG002", Finding(reason, spec.name, expected=allowed, actual=name))
        return
    _check_axes(walk, spec, value)


def _native_name(value: Any) -> str | None:
    """The dtype name of a numpy array's non-native-endian dtype in native order, or None."""
    dtype = getattr(value, "dtype", None)
    if not isinstance(dtype, np.dtype) or dtype.byteorder not in (">", "<") or dtype.isnative:
        return None
    return str(dtype.newbyteorder("="))


def metadata_findings(
    obj: Any, fields: Sequence[FieldSpec], subject: str, *, first_only: bool
) -> tuple[list[MetadataFinding], dict[str, int]]:
    """Explain every metadata failure of ``obj`` (or the first); also return bindings."""
    walk = _Walk(obj, subject)
    for spec in fields:
        value = getattr(obj, spec.name, None)
        if isinstance(spec, ScalarField):
            _check_scalar(walk, spec, value)
        else:
            _check_array(walk, spec, value)
        if walk.findings and first_only:
            break
    return walk.findings, walk.bindings
