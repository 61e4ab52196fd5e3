"""performance/steady.py (what diagnose uses) against the step simulator it summarises: TPOT and the binding
limit agree; TTFT differs by design (the simulator's closed loop starts all requests at once, as a benchmark
does; the steady state assumes arrivals spread over time)."""
import pytest

from inferopt.errors import CourseError
from inferopt.performance import profiles as P
from inferopt.performance.predict import predict
from inferopt.performance.scheduler import SchedulerConfig
from inferopt.performance.steady import steady_state
from inferopt.performance.steptime import Engine
from inferopt.planning import memory
from inferopt.planning import roofline as R
from inferopt.planning.model_specs import load_spec

POINTS = [("llama-3.1-8b", "H100", 1, "bf16", 500, 200, 64, 256),
          ("llama-3.1-8b", "H100", 1, "bf16", 200, 100, 64, 8),
          ("llama-3-70b", "H100", 8, "fp8", 800, 150, 100, 1024),
          ("llama-3-70b", "A100", 4, "bf16", 2000, 100, 32, 256)]


def _steady(model, gpu, tp, w, i, o, c, seqs):
    spec = load_spec(model)
    eng = Engine(spec, R.device_roof(gpu), P.profile("gpu"), tp=tp, weights=w)
    budget = predict(model, gpu, tp=tp, weights=w, input_tokens=i, output_tokens=o, concurrency=1,
                     num_requests=1).max_num_batched_tokens
    cfg = SchedulerConfig(seqs, budget, memory.calculate(spec, gpu, tp=tp, weight_format=w).kv_cache_tokens, 16)
    return steady_state(eng, cfg, i, o, c)


@pytest.mark.parametrize("point", POINTS, ids=[f"{p[0]}-{p[1]}-c{p[6]}-seqs{p[7]}" for p in POINTS])
def test_steady_state_tpot_and_limit_agree_with_the_simulator(point):
    model, gpu, tp, w, i, o, c, seqs = point
    sim = predict(model, gpu, tp=tp, weights=w, input_tokens=i, output_tokens=o, concurrency=c, max_num_seqs=seqs)
    st = _steady(*point)
    assert st.tpot_ms == pytest.approx(sim.tpot_ms, rel=0.3)
    assert st.binding_limit == sim.binding_limit
    assert not st.tpot_ms == pytest.approx(2 * sim.tpot_ms, rel=0.3)       # a doubled step would be caught


def test_steady_state_refuses_bad_input():
    with pytest.raises(CourseError):
        _steady("llama-3.1-8b", "H100", 1, "bf16", 0, 100, 4, 256)
