"""Lab 2 checks: KV bytes per token and per request, the seed's error, the engine's KV log line.

Each function is tested on model shapes made up at check time against the formulas below
(independent of ``inferopt.planning.memory``, which is made unavailable while the learner's code
runs; tests/test_lab_checks.py shows the two agree).
"""
from __future__ import annotations

import copy
import math

from inferopt import assets
from inferopt.labcheck import (
    CheckFailed,
    call,
    counted,
    follows,
    forbid,
    is_real,
    is_whole,
    need,
    need_callable,
    need_number,
    not_a_number,
    passed,
    quiet,
    ratio_hint,
    rng,
)
from inferopt.labcheck.references import REFS as _ref
from inferopt.planning import platform_defaults as _PLATFORM

MEMORY = "inferopt.planning.memory"
FORBIDDEN = [(MEMORY, n) for n in ("kv_bytes_per_token", "kv_bytes_per_request", "calculate",
                                   "cpu_engine_prediction", "engine_prediction", "weight_bytes")]
GB, GiB = 10**9, 2**30
# the block sizes of the course's two engines (planning/platform_defaults.py): the check asks for both, so a
# function that ignores its block_size argument (or types the CPU's) fails
BLOCK_SIZES = (_PLATFORM.CPU.block_size, _PLATFORM.GPU.block_size)


def model_cfg(name: str) -> dict:
    return copy.deepcopy(assets.load(f"models/{name}.json"))


def random_cfg(r) -> dict:
    heads = r.choice([8, 12, 16, 24, 32, 40, 48, 64, 96, 128])
    kv = r.choice([d for d in range(1, heads + 1) if heads % d == 0 and d != heads] or [heads])
    if r.random() < 0.2:
        kv = heads  # plain multi-head attention now and then
    head_dim = r.choice([64, 80, 96, 128, 256])
    return {"num_hidden_layers": r.randint(12, 126), "num_attention_heads": heads, "num_key_value_heads": kv,
            "hidden_size": heads * head_dim}


def _close(a, b, rel=1e-9) -> bool:
    return is_real(a) and abs(a - b) <= rel * max(1.0, abs(b))


@counted
def task1(ns: dict, n_cases: int = 200, seed=None) -> None:
    task = "Task 1"
    per_token, per_request = need_callable(ns, task, "kv_bytes_per_token", "kv_gb_per_request")
    r = rng(seed)
    for _ in range(n_cases):
        cfg, kvb, tokens = random_cfg(r), r.choice([1, 2, 4]), r.choice([512, 1000, 2048, 4096, 8192, 32768])
        heads_ratio = cfg["num_attention_heads"] / cfg["num_key_value_heads"]
        want = _ref.ref_bytes_per_token(cfg, kvb)
        with forbid(ns, FORBIDDEN), quiet():
            got = call(task, per_token, dict(cfg), kvb)
            got_gb = call(task, per_request, dict(cfg), kvb, tokens)
        case = (f"{cfg['num_hidden_layers']} layers, {cfg['num_attention_heads']} heads, {cfg['num_key_value_heads']} "
                f"KV heads, hidden {cfg['hidden_size']}, {kvb} byte(s) per number")
        if not _close(got, want):
            if not is_real(got):
                raise not_a_number(task, "what kv_bytes_per_token returns", got)
            known = {2: "a token stores a key AND a value vector per layer and KV head",
                     kvb: "multiply by the bytes of one number (kv_bytes)"}
            if heads_ratio != 1:
                known[heads_ratio] = "the cache holds the KV heads (GQA), not every attention head"
            raise CheckFailed(f"{task}: kv_bytes_per_token is wrong for a model the check made up ({case}): "
                              + ratio_hint(got, want, "your value", known))
        want_gb = want * tokens / GB
        if not _close(got_gb, want_gb):
            known = {GiB / GB: "GB here means 10^9 bytes (GiB is 2^30)", 1e9: "give the answer in GB, not bytes",
                     1e3: "GB is 10^9 bytes: check the power of ten"}
            raise CheckFailed(f"{task}: kv_gb_per_request is wrong ({case}, {tokens} tokens): "
                              + ratio_hint(got_gb, want_gb, "your value", known))
    passed(f"Task 1 passes: both functions are right on {n_cases} model shapes made up just now")


@counted
def task2(ns: dict, n_cases: int = 300, seed=None) -> None:
    task = "Task 2"
    fit = need_callable(ns, task, "requests_that_fit")
    seed_factor = need_number(ns, task, "seed_factor")
    in_520 = need(ns, task, "requests_in_520_gb")
    r = rng(seed)
    # on the boundary, every run: exact multiples (all whole or halves, so float division is exact),
    # one request more than fits by a hair, and the last one that fits
    for cap, per, want in ((520.0, 0.5, 1040), (300.0, 1.5, 200), (7.5, 2.5, 3), (0.25, 0.5, 0), (9.0, 3.0, 3)):
        with forbid(ns, FORBIDDEN), quiet():
            got = call(task, fit, cap, per)
        if not is_whole(got) or got != want:
            if is_whole(got) and got == want - 1:
                hint = "when the capacity is an exact multiple, the last request fits too"
            elif is_whole(got) and got == want + 1:
                hint = "a request that does not fit whole cannot be served: round down"
            elif not is_whole(got):
                raise not_a_number(task, "what requests_that_fit returns", got, whole=True)
            else:
                hint = "count how many whole requests fit in the capacity"
            raise CheckFailed(f"{task}: requests_that_fit({cap}, {per}) is off by {got - want:+d} on a case the "
                              f"check made up: {hint}")
    for _ in range(n_cases):
        per = round(r.uniform(0.05, 5.0), r.choice([1, 2, 3]))
        cap = round(r.uniform(1, 2000), 1)
        if abs(cap / per - round(cap / per)) < 1e-6:
            continue  # no case where float rounding of an exact multiple decides the answer
        want = math.floor(cap / per)
        with forbid(ns, FORBIDDEN), quiet():
            got = call(task, fit, cap, per)
        if not is_whole(got):
            if is_real(got) and float(got).is_integer():
                raise CheckFailed(f"{task}: requests_that_fit should return a whole number of requests as an int "
                                  f"(int(...), math.floor(...)), got {type(got).__name__}")
            raise not_a_number(task, "what requests_that_fit returns", got, whole=True)
        if got != want:
            hint = ("a request that does not fit whole cannot be served: round down"
                    if got == want + 1 else "count how many whole requests fit in the capacity")
            raise CheckFailed(f"{task}: requests_that_fit({cap}, {per}) is off by {got - want:+d} on a case the "
                              f"check made up: {hint}")
    llama = model_cfg("llama-3-70b")
    true_gb = _ref.ref_bytes_per_token(llama, 1) * 4096 / GB
    if not _close(seed_factor, 2.5 / true_gb, rel=1e-6):
        raise CheckFailed(f"{task}: seed_factor is not the seed's 2.5 GB divided by the true GB of one 4K "
                          "request (compute it from your Task 1 function, do not type it)")
    if not is_whole(in_520) or in_520 != math.floor(520 / true_gb):
        raise CheckFailed(f"{task}: requests_in_520_gb is not what requests_that_fit gives for 520 GB and one 4K "
                          "request of Llama-3-70B with an FP8 cache")
    for _ in range(3):  # when graded: both values follow another model put in `cfg` (a typed value does not)
        other = random_cfg(r)
        gb = _ref.ref_bytes_per_token(other, 1) * 4096 / GB
        if not follows(ns, task, {"cfg": other}, ["seed_factor", "requests_in_520_gb"],
                       {"seed_factor": lambda v, gb=gb: _close(v, 2.5 / gb, rel=1e-6),
                        "requests_in_520_gb": lambda v, gb=gb: is_whole(v) and abs(v - 520 / gb) < 1},
                       "compute both from `cfg` with your functions, do not type them"):
            break
    passed(f"Task 2 passes: requests_that_fit is right on {n_cases} cases made up just now; seed_factor and "
           "requests_in_520_gb follow from your functions")


@counted
def task3(ns: dict, n_cases: int = 200, seed=None, announce: bool = True) -> None:
    task = "Task 3"
    predict = need_callable(ns, task, "engine_prediction")
    tokens, conc = need(ns, task, "predicted_tokens", "predicted_concurrency")
    r = rng(seed)
    for _ in range(n_cases):
        cfg = random_cfg(r)
        dtype_bytes = r.choice([1, 2, 4])
        bs = r.choice(BLOCK_SIZES)
        head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
        block = 2 * bs * cfg["num_key_value_heads"] * head_dim * dtype_bytes * cfg["num_hidden_layers"]
        mml = r.choice([r.randint(200, 8192), bs * r.randint(2, 64)])
        per_req = math.ceil(mml / bs)
        budget = block * r.randint(per_req, 40 * per_req) + r.randint(0, block - 1)
        want_t, want_c = _ref.ref_prediction(cfg, dtype_bytes, budget, mml, bs)
        with forbid(ns, FORBIDDEN), quiet():
            got = call(task, predict, dict(cfg), dtype_bytes, budget, mml, bs)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise CheckFailed(f"{task}: engine_prediction should return a pair (kv_cache_tokens, max_concurrency)")
        got_t, got_c = got
        case = (f"{cfg['num_hidden_layers']} layers, {cfg['num_key_value_heads']} KV heads, head_dim {head_dim}, "
                f"{dtype_bytes} byte(s), budget {budget:,} B, max_model_len {mml}, block_size {bs}")
        if not _close(got_c, want_c):
            blocks = budget // block
            other = [b for b in BLOCK_SIZES if b != bs
                     and _close(got_c, _ref.ref_prediction(cfg, dtype_bytes, budget, mml, b)[1])]
            if other:
                hint = (f"your result fits {other[0]}-token blocks, but this case's block_size is {bs}: use the "
                        "block_size argument everywhere, do not type a block size")
            elif _close(got_c, blocks / (mml / bs)):
                hint = "a request occupies whole blocks: blocks per request = ceil(max_model_len / block_size)"
            elif _close(got_c, math.ceil(budget / block) / per_req):
                hint = "only whole blocks fit in the budget: blocks = budget // bytes per block (round down)"
            else:
                hint = ratio_hint(got_c, want_c, "your max concurrency",
                                  {2: "one block holds keys AND values", dtype_bytes: "use the dtype's bytes",
                                   bs: "a block holds block_size tokens (the argument), not one"})
            raise CheckFailed(f"{task}: max concurrency is wrong for a model the check made up ({case}): {hint}")
        if not is_whole(got_t) or got_t != want_t:
            if is_whole(got_t) and got_t == (budget // block) * bs and got_t != want_t:
                hint = ("that is blocks x block_size; vLLM logs int(max concurrency x max_model_len), which differs "
                        "when max_model_len is not a multiple of block_size")
            elif not is_whole(got_t):
                hint = ("it is None: did you forget `return`?" if got_t is None else
                        f"it should be a whole number (vLLM logs whole tokens), got {type(got_t).__name__}")
            else:
                hint = f"off by {got_t - want_t:+,} tokens: the log line is int(max concurrency x max_model_len)"
            raise CheckFailed(f"{task}: KV cache tokens are wrong ({case}): {hint}")
    smol = model_cfg("smollm2-135m-instruct")
    from inferopt.serving.gpu import engine_kind
    kind = engine_kind()
    bs = _PLATFORM.defaults(kind).block_size
    want_t, want_c = _ref.ref_prediction(smol, 4, 536_870_912, 1536, bs)
    if not is_whole(tokens) or tokens != want_t:
        raise CheckFailed(f"{task}: predicted_tokens is not what your engine_prediction gives for SmolLM2 "
                          f"(float32 = 4 bytes, 0.5 GiB budget, max_model_len 1536, and the block size of this "
                          f"machine's {kind.upper()} engine: read it, do not type it)")
    if not _close(conc, round(want_c, 2)):
        raise CheckFailed(f"{task}: predicted_concurrency should be your engine_prediction's concurrency for "
                          "SmolLM2, rounded to 2 decimals as the log prints it")
    for _ in range(3):  # when graded: the prediction follows another model, budget and block size
        other, bs2 = random_cfg(r), r.choice(BLOCK_SIZES)
        hd = other["hidden_size"] // other["num_attention_heads"]
        block = 2 * bs2 * other["num_key_value_heads"] * hd * 4 * other["num_hidden_layers"]
        budget2 = block * r.randint(math.ceil(1536 / bs2), 40 * math.ceil(1536 / bs2)) + r.randint(0, block - 1)
        want_t, want_c = _ref.ref_prediction(other, 4, budget2, 1536, bs2)
        if not follows(ns, task, {"smol": other, "budget": budget2, "block_size": bs2},
                       ["predicted_tokens", "predicted_concurrency"],
                       {"predicted_tokens": want_t, "predicted_concurrency": lambda v, c=want_c: _close(v, round(c, 2))},
                       "compute both with your engine_prediction from `smol`, `budget` and `block_size`, do not "
                       "type them"):
            break
    if announce:
        passed(f"Task 3 passes: engine_prediction is right on {n_cases} model shapes and budgets made up just now")


def ready_for_engine(ns: dict) -> None:
    """Raise (one line) unless Task 3 passes: the engine starts only for a prediction worth testing."""
    try:
        task3(ns, n_cases=50, announce=False)
    except CheckFailed as exc:
        raise type(exc)(f"finish Task 3 before starting the engine ({exc})") from None
