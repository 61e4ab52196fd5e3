"""How GPUs are laid out for one model (issue 19): tensor parallelism (TP, 张量并行) inside a node,
pipeline parallelism (PP, 流水线并行) across nodes, replicas (副本) for throughput.

vLLM's distributed-serving guide (docs.vllm.ai, "Distributed inference and serving"): a model that
fits one node uses TP = GPUs of that node; one that needs several nodes uses TP = GPUs per node and
PP = number of nodes. TP's all-reduce runs every layer and needs NVLink: it never spans nodes.
Throughput beyond one copy comes from more replicas, not a larger TP.

    layout(gpus_for_memory=16, gpus_per_node=8, replicas=1) -> Topology(tp=8, pp=2, replicas=1)
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from inferopt.errors import CourseError


def pow2_ceil(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, x))))


def tp_within_node(tp: int, gpus_per_node: int) -> int:
    """The largest power of two <= tp that fits one node."""
    t = 1
    while t * 2 <= min(tp, gpus_per_node):
        t *= 2
    return t


@dataclass(frozen=True)
class Topology:
    tp: int
    pp: int
    replicas: int
    gpus_per_node: int

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp

    @property
    def gpus(self) -> int:
        return self.gpus_per_replica * self.replicas

    @property
    def nodes_per_replica(self) -> int:
        return math.ceil(self.gpus_per_replica / self.gpus_per_node)

    def flags(self) -> list[str]:
        f = ["--tensor-parallel-size", str(self.tp)]
        if self.pp > 1:
            f += ["--pipeline-parallel-size", str(self.pp)]
        return f

    def as_dict(self) -> dict:
        return {**asdict(self), "gpus_per_replica": self.gpus_per_replica, "gpus": self.gpus,
                "nodes_per_replica": self.nodes_per_replica}

    def describe(self) -> str:
        s = f"TP={self.tp}"
        if self.pp > 1:
            s += f" within each node x PP={self.pp} across {self.pp} nodes"
        return s + f", {self.replicas} replica(s), {self.gpus} GPUs"


def layout(gpus_for_memory: int, gpus_per_node: int, replicas: int = 1, total_gpus: int | None = None) -> Topology:
    """TP/PP/replicas for a model that needs ``gpus_for_memory`` GPUs to hold weights + KV.

    TP is a power of two up to the node size; beyond one node, PP = the number of nodes a copy needs.
    ``total_gpus`` (optional): what is there; CourseError when the layout needs more."""
    if gpus_per_node < 1 or gpus_for_memory < 1 or replicas < 1:
        raise CourseError("topology: GPUs per node, GPUs needed and replicas must each be at least 1")
    if gpus_for_memory <= gpus_per_node:
        tp, pp = pow2_ceil(gpus_for_memory), 1
        if tp > gpus_per_node:
            tp = gpus_per_node
    else:
        tp = tp_within_node(gpus_per_node, gpus_per_node)
        pp = math.ceil(gpus_for_memory / tp)
    t = Topology(tp, pp, replicas, gpus_per_node)
    if total_gpus is not None and t.gpus > total_gpus:
        raise CourseError(f"topology: {t.describe()} needs {t.gpus} GPUs but {total_gpus} are there; "
                          "add GPUs or lower the replicas")
    return t
