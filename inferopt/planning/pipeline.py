"""Pipeline parallelism (PP): how vLLM 0.32 splits the decoder layers over PP stages.

vLLM's ``get_pp_indices`` (``vllm/distributed/utils.py``) gives each of the ``pp`` stages
``layers // pp`` layers; the remainder ``r = layers % pp`` goes one layer each to the ``r`` stages
just before the last one (``partitions[-2], partitions[-3], ...``: the last stage also holds the
final norm and the LM head). ``VLLM_PP_LAYER_PARTITION="a,b,..."`` overrides the split: it must
name ``pp`` whole numbers that add up to the layer count (vLLM raises a ValueError otherwise).

Each GPU of a stage holds only that stage's layers, so the KV cache per GPU counts the stage's
layers (the largest stage bounds how many blocks every stage can hold: vLLM takes the minimum
block count over workers), and the stage's weights: its layers split TP ways, plus the embedding on
the first stage and the LM head on the last (tied: vLLM's llama.py builds the embedding on the last rank too
and ties the head to it, so the last stage holds one embedding-sized matrix). KV heads per rank
stay ``max(1, kv_heads // TP)``: TP8 x PP2 is not TP16.
"""
from __future__ import annotations

from inferopt.errors import CourseError


def stage_layers(num_layers: int, pp: int = 1, partition: str | None = None) -> list[int]:
    """Decoder layers of each PP stage, as vLLM's ``get_pp_indices`` assigns them.

    ``partition``: the value of ``VLLM_PP_LAYER_PARTITION`` (comma-separated layer counts), or None.
    """
    if not (isinstance(pp, int) and pp >= 1):
        raise CourseError(f"PP must be a whole number >= 1, got {pp!r}.")
    if not (isinstance(num_layers, int) and num_layers >= 1):
        raise CourseError(f"the model must have at least one layer, got {num_layers!r}.")
    if partition is not None:
        try:
            parts = [int(x) for x in str(partition).split(",")]
        except ValueError:
            raise CourseError(f"VLLM_PP_LAYER_PARTITION={partition!r} is not a comma-separated list of "
                              f"whole numbers (vLLM: 'Invalid partition string').") from None
        if len(parts) != pp:
            raise CourseError(f"VLLM_PP_LAYER_PARTITION={partition!r} names {len(parts)} stages but PP={pp}: "
                              f"give one layer count per stage.")
        if sum(parts) != num_layers:
            raise CourseError(f"VLLM_PP_LAYER_PARTITION={partition!r} adds up to {sum(parts)} layers but the "
                              f"model has {num_layers}: the counts must add up to the layer count.")
        if min(parts) < 0:
            raise CourseError(f"VLLM_PP_LAYER_PARTITION={partition!r} has a negative layer count.")
        return parts
    if pp > num_layers:
        raise CourseError(f"PP={pp} exceeds the model's {num_layers} layers: every stage needs at least one "
                          f"layer; choose PP <= {num_layers}.")
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def stage_ranges(num_layers: int, pp: int = 1, partition: str | None = None) -> list[tuple[int, int]]:
    """(start, end) layer index of each stage, end exclusive, as ``get_pp_indices`` returns them."""
    out, start = [], 0
    for n in stage_layers(num_layers, pp, partition):
        out.append((start, start + n))
        start += n
    return out
