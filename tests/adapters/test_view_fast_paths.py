"""The views' C-level fast paths give what the one-row-at-a-time readings gave, on any input.

Each reference below is the straightforward per-row reading the fast path replaced; the
fast path must agree with it wherever it gave an answer, and must turn what made it
raise a foreign exception (ids beyond int64) into a ContractViolation naming the field.
"""

from __future__ import annotations

import numpy as np
import pytest
from atom_engine import BLOCK_SIZE, VOCAB, decode_batch, sequence
from hypothesis import example, given
from hypothesis import strategies as st
from vllm_engine import scheduler_output

from specguard import contracts
from specguard.adapters import AtomView, StepTracker, VllmView
from specguard.adapters.engines.atom import view as atom_view
from specguard.adapters.engines.vllm import _readers as vllm_readers
from specguard.adapters.engines.vllm._drafts import dense_drafts
from specguard.contracts._boundaries._dense_rows import draft_row
from specguard.contracts.ops import is_int

K = 3


class RaisingIndex:
    """An integer-like whose ``__index__`` raises something that is no TypeError."""

    def __index__(self) -> int:
        raise ValueError("no index today")


ELEMENTS = st.sampled_from([
    0, 1, 7, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, -1, True, False, 1.5, "a", None,
    np.int8(3), np.int64(5), np.uint64(9), np.uint64(2**63), [1], (2,), {"k": 1},
    RaisingIndex()])
LISTS = st.lists(ELEMENTS, max_size=5)


@pytest.fixture(autouse=True)
def _everything():
    """Full depth and every rule, so that every reading meets a check."""
    with contracts.checking(depth="full", collect="all"):
        yield


def _ids_one_by_one(req_ids):
    """The per-row reading of ``req_ids`` the ATOM view's fast path replaced."""
    if not isinstance(req_ids, list | tuple):
        return req_ids
    if all(is_int(i) for i in req_ids):
        return np.asarray(req_ids, dtype=np.int64).reshape(len(req_ids))
    try:
        ids = np.asarray(req_ids)
    except (TypeError, ValueError, OverflowError):
        return req_ids
    return ids if ids.ndim == 1 and ids.shape[0] == len(req_ids) else req_ids


def _first_blocks_one_by_one(tables, lengths):
    """Each table's first block id, -1 when empty, one table at a time."""
    return np.fromiter((t[0] if t else -1 for t in tables), dtype=np.int64, count=len(tables))


def _slots_one_by_one(groups, per_req_state):
    """The per-row reading of ``per_req_cache_groups``."""
    if groups is None:
        return None
    if isinstance(groups, list | tuple):
        if not groups and not per_req_state:
            return None
        if all(is_int(g) for g in groups):
            return np.asarray(groups, dtype=np.int64).reshape(len(groups))
        return groups
    return groups if per_req_state is not False else None


def _outcome(call):
    """What a view call did: its contract view's arrays, its violation, or a foreign error."""
    try:
        out = call()
    except contracts.ContractViolation as violation:
        return "violation", str(violation)
    except Exception as error:  # a foreign exception is what is compared
        return "foreign", type(error).__name__
    arrays = {name: getattr(out, name) for name in ("seq_ids", "block_tables", "state_slots")}
    return "ok", {name: (str(a.dtype), a.tolist()) if isinstance(a, np.ndarray) else repr(a)
                  for name, a in arrays.items()}


def _atom_both_ways(field, value, name, reference, *, per_req_state=None):
    """Run the ATOM view on a batch whose ``field`` is ``value``, with the fast reading and
    with the reference one; return both outcomes."""
    seqs = [sequence(i, 40, drafts=K) for i in range(4)]
    atom = decode_batch(seqs, dense=True)
    setattr(atom, field, value)

    def run():
        view = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE,
                        tracker=StepTracker(), per_req_state=per_req_state)
        return _outcome(lambda: view(atom))

    fast = run()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(atom_view, name, reference)
        slow = run()
    return fast, slow


def _agree(fast, slow, field):
    """Same outcome; where the reference raised a foreign error, a violation naming ``field``."""
    assert fast[0] != "foreign", fast
    if slow[0] == "foreign":
        assert fast[0] == "violation" and field in fast[1], fast
    else:
        assert fast == slow


@given(req_ids=LISTS)
def test_atom_req_ids_read_in_one_pass_agree_with_one_by_one(req_ids):
    """Any list of request ids gives the verdict the per-row reading gave; ids beyond
    int64 are a violation naming seq_ids instead of an OverflowError."""
    fast, slow = _atom_both_ways("req_ids", req_ids, "_ids", _ids_one_by_one)
    _agree(fast, slow, "seq_ids")


def test_atom_req_ids_beyond_int64_are_a_violation_naming_seq_ids():
    """A request id of 2**63 does not fit the int64 seq ids: a ContractViolation."""
    atom = decode_batch([sequence(i, 40, drafts=K) for i in range(2)], dense=True)
    atom.req_ids = [0, 2**63]
    view = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE)
    with pytest.raises(contracts.ContractViolation, match="seq_ids"):
        view(atom)


TABLES = st.lists(st.one_of(
    st.lists(st.integers(0, 300), max_size=6), st.lists(ELEMENTS, max_size=3),
    st.tuples(st.integers(0, 300), st.integers(0, 300)), st.sampled_from(
        ["ab", None, 5, np.arange(3), (), []])), min_size=3, max_size=5)


@given(tables=TABLES)
def test_atom_block_tables_read_in_passes_agree_with_one_by_one(tables):
    """Any block-table list, empty or foreign tables included, gives the same verdict."""
    fast, slow = _atom_both_ways("block_tables", tables, "_first_blocks",
                                 _first_blocks_one_by_one)
    _agree(fast, slow, "block_tables")


@given(groups=LISTS, per_req_state=st.sampled_from([None, True, False]))
def test_atom_cache_groups_read_in_one_pass_agree_with_one_by_one(groups,
                                                                 per_req_state):
    """Any ``per_req_cache_groups`` list gives the verdict the per-row reading gave."""
    fast, slow = _atom_both_ways("per_req_cache_groups", groups, "_state_slots",
                                 _slots_one_by_one, per_req_state=per_req_state)
    _agree(fast, slow, "state_slots")


def _counts_one_by_one(values, order):
    """The per-request reading of ``num_scheduled_tokens``."""
    return np.array([vllm_readers.count_of(v, r) for v, r in zip(values, order, strict=True)],
                    dtype=np.int64)


@given(values=st.lists(st.one_of(st.integers(0, 2**40), ELEMENTS), max_size=5))
def test_vllm_counts_read_in_one_pass_agree_with_one_by_one(values):
    """Scheduled counts of any type give the array (or the SG002) of the per-request path."""
    order = tuple(f"r{i}" for i in range(len(values)))

    def outcome(read):
        try:
            return "ok", read(values, order).tolist()
        except contracts.ContractViolation as violation:
            return "violation", str(violation)
        except OverflowError:
            return "foreign", "OverflowError"

    assert outcome(vllm_readers.counts_of) == outcome(_counts_one_by_one)


@given(entries=st.dictionaries(st.sampled_from(["a", "b", "c", "x"]), st.one_of(
    st.lists(st.integers(-1, 50), min_size=K, max_size=K),
    st.lists(st.integers(-1, 50), max_size=4), ELEMENTS)),
       order=st.lists(st.sampled_from(["a", "b", "c"]), max_size=4))
def test_vllm_listed_counts_agree_with_one_by_one(entries, order):
    """Listed draft counts of any entries, repeated requests included, are what ``len`` (0
    without one) gives per request, whether read from the lists or from the dense rows."""
    expected = [vllm_readers.length_of(entries.get(r)) for r in order]
    order = tuple(order)
    assert vllm_readers.listed_counts(entries, order).tolist() == expected
    dense = dense_drafts(order, entries, K)
    assert vllm_readers.listed_counts(entries, order, dense, K).tolist() == expected


def _dense_one_by_one(order, drafts, mtp_k):
    """The per-request reading of the drafts: sorted positions and the listed rows."""
    position = {request: i for i, request in enumerate(order)}
    decode = sorted(position[r] for r in drafts if r in position)
    lists = [drafts[order[p]] for p in decode]
    if len(decode) != len(drafts):
        return decode, None
    if lists and not all(type(d) is list and len(d) == mtp_k for d in lists):
        return decode, None
    if not lists:
        return decode, np.zeros((0, mtp_k), dtype=np.int64)
    rows = []
    for listed in lists:  # DraftTokens.from_mapping's reading of each seq's drafts
        row = draft_row(listed)
        if row is None or row.shape != (mtp_k,):
            return decode, None
        rows.append(row)
    return decode, np.stack(rows)


@given(drafts=st.dictionaries(st.sampled_from(["a", "b", "c", "x"]), st.one_of(
    st.lists(st.integers(-1, 50), min_size=K, max_size=K), st.lists(ELEMENTS, max_size=4))),
       order=st.permutations(["a", "b", "c"]))
def test_vllm_dense_drafts_agree_with_one_by_one(drafts, order):
    """Positions and listed rows match the per-request reading; None exactly where it
    sends the drafts to ``DraftTokens.from_mapping``."""
    positions, rows = dense_drafts(tuple(order), drafts, K)
    expected_positions, expected = _dense_one_by_one(tuple(order), drafts, K)
    assert (rows is None) == (expected is None)
    if rows is not None and expected is not None:  # both or neither, as just asserted
        assert positions.tolist() == expected_positions
        assert rows.tolist() == expected.tolist()


@given(batches=st.lists(st.lists(st.sampled_from("abcdef"), max_size=6), max_size=6))
@example(batches=[["a", "b"], ["a", "b"], ["b", "a"], ["a", "b", "a"], ["a", "b", "a"],
                  ["a", "b"], ["a", "b"], ["c"]])
def test_vllm_stable_ids_agree_with_one_by_one(batches):
    """Tracker ids over any sequence of batches, repeated requests included, are the ones
    numbered one request at a time."""
    fast, slow = VllmView(mtp_k=K, vocab_size=VOCAB), VllmView(mtp_k=K, vocab_size=VOCAB)
    for batch in batches:
        order = tuple(batch)
        assert fast._stable_ids(order).tolist() == slow._stable_ids_one_by_one(order).tolist()
        assert fast._names == slow._names


@given(ids=st.lists(st.one_of(st.sampled_from(["a", "b", "c"]), ELEMENTS), max_size=4),
       values=st.lists(st.one_of(st.integers(0, 100), ELEMENTS), max_size=4))
def test_vllm_computed_tokens_agree_with_one_by_one(ids, values):
    """``num_computed_tokens`` of cached requests of any type: the per-request reading."""
    output = scheduler_output({"a": [5, 6, 7]}, {"p": 4})
    output.scheduled_cached_reqs.req_ids = ids
    output.scheduled_cached_reqs.num_computed_tokens = values
    order = ("a", "b", "c", "p")
    computed = {"p": 0}
    for request, value in zip(ids, values, strict=False):
        if is_int(value) and isinstance(request, str):
            computed[request] = int(value)
    try:
        expected = ("ok", [computed.get(r, -1) for r in order])
        np.array(expected[1], dtype=np.int64)
    except OverflowError:
        expected = ("foreign", "OverflowError")
    try:
        found = ("ok", vllm_readers.computed_tokens(output, order).tolist())
    except OverflowError:
        found = ("foreign", "OverflowError")
    assert found == expected


def test_vllm_view_in_dict_order_and_in_runner_order_agree():
    """The same SchedulerOutput read in its dict order and in a given runner order checks
    the same requests: the no-lookup path and the lookup path agree."""
    output = scheduler_output({"a": [5, 6, 7], "b": [1, 2, 3]}, {"p": 4})
    own = VllmView(mtp_k=K, vocab_size=VOCAB, tracker=StepTracker()).schedule(output)
    given_order = VllmView(mtp_k=K, vocab_size=VOCAB, tracker=StepTracker()).schedule(
        output, req_ids=["p", "b", "a"])
    assert own.req_ids == ("a", "b", "p")
    assert own.num_scheduled.tolist() == [4, 4, 4]
    assert given_order.num_draft_tokens.tolist() == [0, 3, 3]
    assert given_order.draft_tokens.seq_ids.tolist() == [1, 2]
    assert given_order.draft_tokens.draft_token_ids.tolist() == [[1, 2, 3], [5, 6, 7]]


@pytest.mark.parametrize("values", [[50, 51, 52, 0], [50, True, 52, 0], [50, 2**63, 52, 0],
                                    [50, 51, 52]])
def test_vllm_computed_tokens_of_the_batch_in_order_agree_with_one_by_one(values):
    """Cached requests that are exactly the batch, in order, read as the list they are;
    a bool, an int beyond int64 or a short list take the per-request reading."""
    output = scheduler_output({"a": [5, 6, 7], "b": [1], "c": [2]}, {"p": 4})
    order = ("a", "b", "c", "p")
    output.scheduled_cached_reqs.req_ids = list(order)
    output.scheduled_cached_reqs.num_computed_tokens = values

    def read(**options):
        try:
            return vllm_readers.computed_tokens(output, order, **options).tolist()
        except OverflowError:
            return "OverflowError"

    assert read(unique=True) == read()


@pytest.mark.parametrize("ones", [3, 200], ids=["few", "many"])
def test_vllm_ints_of_refuses_a_bool_among_many_zeros_and_ones(ones):
    """A bool reads as 0 or 1 to ``array("q")``: among a few such entries each is looked
    at, among many they are counted at once; either way a bool sends the list to the
    per-request reading, and plain integers (numpy's too) are read as they are."""
    plain = [1] * ones + [7, np.int64(9)]
    packed = vllm_readers.ints_of(plain)
    assert packed is not None and packed.tolist() == [1] * ones + [7, 9]
    for at in (0, ones - 1):
        with_bool = list(plain)
        with_bool[at] = True
        assert vllm_readers.ints_of(with_bool) is None
    assert vllm_readers.ints_of([*plain, 1.0]) is None
    assert vllm_readers.ints_of([*plain, 2**63]) is None


@given(values=LISTS)
def test_pack_int64_agrees_with_reading_each_entry_as_an_index(values):
    """Packed entries are what ``operator.index`` reads, within int64; anything else
    (a float, a string, None, a list, an integer past int64) is refused as a whole."""
    import operator

    from specguard.adapters._packing import pack_int64

    def index(value):
        try:
            read = operator.index(value)
        except (TypeError, ValueError):
            return None
        return read if -(2**63) <= read < 2**63 else None

    read = [index(v) for v in values]
    packed = pack_int64(values, len(values))
    if any(r is None for r in read):
        assert packed is None
    else:
        assert packed is not None and packed.dtype == np.int64 and packed.tolist() == read


def test_pack_int64_refuses_a_wrong_count_and_gives_a_writable_vector():
    from specguard.adapters._packing import pack_int64

    assert pack_int64(iter([1, 2, 3]), 2) is None
    assert pack_int64([1, 2], 3) is None
    packed = pack_int64(iter([4, 5]), 2)
    assert packed is not None
    packed[0] = 9  # a view's arrays may be written by the code that owns them
    assert packed.tolist() == [9, 5]
