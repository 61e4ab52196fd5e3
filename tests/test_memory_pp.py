"""Pipeline parallelism in the memory calculator: the layer split is vLLM's own ``get_pp_indices``
(vllm/distributed/utils.py, called directly here), the KV cache and the weights per GPU count only the largest
stage's layers, and TP8 x PP2 is not sized as TP16. PP=1 keeps every figure it had."""
import pytest

from inferopt.errors import CourseError
from inferopt.planning import memory as M
from inferopt.planning import pipeline
from inferopt.planning.model_specs import load_spec

# (layers, pp): even splits, remainders of 1..pp-1 (Llama-3.1-405B's 126 over 4, DeepSeek-V3's 61 over 4/8), pp = layers
PAIRS = [(32, 1), (32, 2), (80, 2), (80, 3), (126, 4), (61, 4), (61, 8), (30, 4), (27, 5), (95, 8), (7, 7), (10, 6)]


@pytest.fixture(scope="module")
def get_pp_indices():
    from vllm.distributed.utils import get_pp_indices
    return get_pp_indices


@pytest.mark.parametrize("layers,pp", PAIRS)
def test_stage_layers_are_vllms_get_pp_indices(get_pp_indices, monkeypatch, layers, pp):
    monkeypatch.delenv("VLLM_PP_LAYER_PARTITION", raising=False)
    vllm_ranges = [get_pp_indices(layers, r, pp) for r in range(pp)]
    assert pipeline.stage_ranges(layers, pp) == vllm_ranges
    assert sum(pipeline.stage_layers(layers, pp)) == layers


def test_the_remainder_goes_before_the_last_stage_not_to_the_first(get_pp_indices, monkeypatch):
    monkeypatch.delenv("VLLM_PP_LAYER_PARTITION", raising=False)
    # a naive split (extra layers to the first stages) is what vLLM does NOT do
    naive = [61 // 4 + (1 if r < 61 % 4 else 0) for r in range(4)]
    vllm = [e - s for s, e in (get_pp_indices(61, r, 4) for r in range(4))]
    assert vllm != naive and pipeline.stage_layers(61, 4) == vllm == [15, 15, 16, 15]


@pytest.mark.parametrize("partition,layers,pp", [("10,22", 32, 2), ("20,20,20,20", 80, 4), ("1,30,1", 32, 3)])
def test_vllm_pp_layer_partition_overrides_the_split(get_pp_indices, monkeypatch, partition, layers, pp):
    monkeypatch.setenv("VLLM_PP_LAYER_PARTITION", partition)
    assert pipeline.stage_ranges(layers, pp, partition) == [get_pp_indices(layers, r, pp) for r in range(pp)]


@pytest.mark.parametrize("partition,layers,pp", [("10,20", 32, 2), ("16,16", 32, 3), ("a,b", 32, 2)])
def test_a_partition_vllm_refuses_is_refused(get_pp_indices, monkeypatch, partition, layers, pp):
    monkeypatch.setenv("VLLM_PP_LAYER_PARTITION", partition)
    with pytest.raises(ValueError):
        get_pp_indices(layers, 0, pp)
    with pytest.raises(CourseError, match="VLLM_PP_LAYER_PARTITION"):
        pipeline.stage_layers(layers, pp, partition)


def test_bad_pp_is_one_line():
    for bad in (0, -1, 2.5):
        with pytest.raises(CourseError, match="PP must be a whole number"):
            pipeline.stage_layers(32, bad)
    with pytest.raises(CourseError, match="exceeds the model's 32 layers"):
        M.calculate("llama-3.1-8b", "H100", pp=33, max_model_len=4096)


def test_kv_per_gpu_counts_the_largest_stage_and_tp8_pp2_is_not_tp16():
    spec = load_spec("llama-3-70b")                     # 80 layers, 8 KV heads
    pp = M.calculate(spec, "H100", tp=8, pp=2, max_model_len=8192)
    tp8 = M.calculate(spec, "H100", tp=8, max_model_len=8192)
    tp16 = M.calculate(spec, "H100", tp=16, max_model_len=8192)
    assert pp.pp_stage_layers == [40, 40]
    assert pp.kv_heads_per_gpu == max(1, 8 // 8) == tp8.kv_heads_per_gpu
    assert pp.page_bytes_per_layer == tp8.page_bytes_per_layer
    assert pp.bytes_per_block == tp8.page_bytes_per_layer * 40
    assert pp.kv_bytes_per_token_per_gpu == tp8.kv_bytes_per_token_per_gpu // 2
    # the old treatment (PP folded into TP: TP16, every layer on every GPU) gives another block size
    assert tp16.bytes_per_block == tp16.page_bytes_per_layer * 80 != pp.bytes_per_block
    assert pp.kv_bytes_per_token == tp8.kv_bytes_per_token      # the whole-model figure does not depend on the layout


def test_an_uneven_split_is_bounded_by_its_largest_stage():
    spec = load_spec("llama-3.1-405b-instruct-fp8")       # 126 layers over 4 stages: [31, 32, 32, 31]
    r = M.calculate(spec, "H200", tp=8, pp=4, weight_format="auto", max_model_len=8192)
    assert r.pp_stage_layers == [31, 32, 32, 31]
    assert r.bytes_per_block == r.page_bytes_per_layer * 32
    forced = M.calculate(spec, "H200", tp=8, pp=4, weight_format="auto", max_model_len=8192,
                         pp_layer_partition="30,30,30,36")
    assert forced.bytes_per_block == r.page_bytes_per_layer * 36 and forced.num_blocks < r.num_blocks


def test_weights_per_gpu_are_the_largest_stages():
    spec = load_spec("llama-3.1-8b")                      # untied: embedding on stage 0, LM head on the last
    wb = M.weight_bytes(spec, "bf16")
    p = spec.params()
    one = M.calculate(spec, "H100", tp=1, max_model_len=4096)
    two = M.calculate(spec, "H100", tp=1, pp=2, max_model_len=4096)
    assert two.weights_gib_per_gpu < one.weights_gib_per_gpu
    # the two stages together hold the whole model once (the LM head once, untied)
    total = wb["total"] / M.GiB
    assert two.weights_gib_per_gpu == pytest.approx(total / 2, rel=0.01)
    assert two.weights_gib_per_gpu >= total / 2
    assert p.lm_head == p.embedding                         # so both end stages weigh the same here
    tied = load_spec("smollm2-135m-instruct")               # tied: the last stage holds its own copy of the head
    t2 = M._weights_per_gpu(tied, M.weight_bytes(tied, "bf16"), 1, 2) / M.GiB
    assert t2 > M.weight_bytes(tied, "bf16")["total"] / M.GiB / 2


@pytest.mark.parametrize("model,tp", [("llama-3.1-8b", 1), ("llama-3-70b", 4), ("mixtral-8x7b", 2),
                                      ("deepseek-v2-lite", 1), ("qwen2.5-7b-instruct", 2)])
def test_pp1_keeps_every_figure(model, tp):
    a = M.calculate(model, "H200", tp=tp, max_model_len=4096)
    b = M.calculate(model, "H200", tp=tp, pp=1, max_model_len=4096)
    assert a.as_dict() == b.as_dict() and a.pp_stage_layers is None
    spec = load_spec(model)
    wb = M.weight_bytes(spec, "bf16")
    norms_b = spec.params().norms * 2
    assert a.weights_gib_per_gpu * M.GiB == pytest.approx((wb["total"] - norms_b) / tp + norms_b)
    assert a.bytes_per_block == a.page_bytes_per_layer * spec.num_layers


def test_cli_pp_flags(capsys):
    from inferopt.__main__ import main
    assert main(["memory", "--model", "llama-3-70b", "--tp", "8", "--pp", "2", "--max-model-len", "8192"]) == 0
    out = capsys.readouterr().out
    assert "page x 40 layers (largest of the PP stages [40, 40])" in out


def test_the_planner_sizes_a_two_node_plan_as_tp8_x_pp2_not_tp16():
    import copy

    from inferopt.planning.planner import load_scenario, make_plan
    sc = copy.deepcopy(load_scenario("llama3-70b-chat"))
    sc["requirements"].update(gpus=16, gpus_per_node=8)
    sc["plan"].update(tensor_parallel_size=8, pipeline_parallel_size=2)
    m = make_plan(sc).memory
    assert (m.tp, m.pp, m.pp_stage_layers) == (8, 2, [40, 40])
    tp16 = M.calculate(sc["requirements"]["model"], sc["requirements"]["gpu"], tp=16, max_model_len=m.max_model_len,
                       weight_format=sc["plan"]["weight_format"], kv_dtype=sc["plan"]["kv_cache_dtype"])
    assert m.bytes_per_block == m.page_bytes_per_layer * 40 != tp16.bytes_per_block
