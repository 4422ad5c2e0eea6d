"""Rules enforced by the compiled field specs: types, dtypes, ranks, shared dimensions."""

from __future__ import annotations

from specguard.contracts._core._registry import Boundary, structural_rule

__all__: list[str] = []

structural_rule(
    "SG000", "every check can evaluate",
    why="""A check met input so malformed that evaluating it raised. specguard reports
    that as a violation instead of letting an IndexError or a numpy error escape from
    the middle of validation.""",
    bug="Bad input surfacing as a foreign exception far from its cause (both seed bugs).",
)
structural_rule(
    "SG001", "field has the declared type",
    why="""Array fields hold a numpy array or a torch tensor, scalar fields a Python or
    numpy integer. A list, a dict or None where an array belongs is caught here, before
    any code indexes it.""",
    bug="ATOM's positional arrays built with np.asarray(list(dict.values())) from dicts.",
)
structural_rule(
    "SG002", "array has an allowed dtype",
    why="""Ids and counts are int32 or int64; phase masks are bool. Float ids (NaN
    included), bool ids or object arrays are rejected by dtype, never cast.""",
    bug="Ascend's index_fill_ on int32 failing on 310P (vllm-ascend #10305).",
)
structural_rule(
    "SG003", "array has the declared rank and fixed sizes",
    why="""Each field declares its axes. A 1-D array where rows are expected, or a
    flattened draft matrix, is caught before a reshape hides it.""",
    bug="ATOM's non-deferred branch indexing a 1-D array as 2-D ('too many indices').",
)
structural_rule(
    "SG004", "named dimensions agree across fields",
    why="""A named dimension has one length in every field that uses it.""",
    bug="vLLM #14237: padded hidden states disagreeing with the batch size under CUDA graphs.",
)
structural_rule(
    "SG005", "one backend and one device per object",
    why="""Mixing numpy and torch, or CPU and CUDA tensors, in one object makes every
    cross-field check (and the runner's own arithmetic) fail in a foreign way.""",
    bug="Host/device mix-ups between scheduler metadata and runner buffers.",
)
structural_rule(
    "SG006", "scalar is within its range",
    why="""mtp_k, vocab_size and the block size are positive; counts are not negative.""",
    bug="SGLang silently adjusting num_draft_tokens instead of rejecting it (server_args).",
)
structural_rule(
    "SG101", "one draft row per decode seq, in batch order",
    boundary=Boundary.SCHEDULE,
    why="""The runner reads draft rows by batch position. A scheduler that writes rows
    only for decode seqs that already have drafts produces a compacted array: every later
    row shifts onto the wrong seq, and the last lookup runs off the end.""",
    bug="ATOM #1444: IndexError: index 127 is out of bounds for axis 0 with size 127.",
)
structural_rule(
    "SG102", "row width follows mtp_k",
    boundary=Boundary.SCHEDULE,
    why="""Draft rows are mtp_k wide and verify rows mtp_k+1 wide. A PD first decode with
    fewer transferred drafts, or a drafter configured with another k, breaks every
    reshape(n, k+1) downstream.""",
    bug="ATOM C5: PD first decode slicing drafts to mtp_k without padding (ragged rows).",
)
structural_rule(
    "SG104", "flat token stream has num_tokens entries",
    boundary=Boundary.SCHEDULE,
    why="""The runner sizes its input buffers from the total token count; a token array
    of another length leaves stale tokens in the buffer or overruns it.""",
    bug="vLLM I6: the runner mutating total_num_scheduled_tokens in async mode.",
)
structural_rule(
    "SG105", "one entry per seq in every per-seq array",
    boundary=Boundary.SCHEDULE,
    why="""Block tables, context lengths and per-request state slots are read by batch
    position. A list filtered on a condition (an empty block table, no state group)
    shifts every later seq onto its neighbour's entry.""",
    bug="ATOM C12/C13: block_tables filtered by `if seq.block_table`, "
    "per_req_cache_groups compacted and silently zero-filled by DeepSeek-V4.",
)
