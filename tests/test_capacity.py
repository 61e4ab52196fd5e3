"""Capacity planning: seed §6.3 reproduced, availability arithmetic, canary steps, CLI."""
import json
import math
import subprocess
import sys

import pytest

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT
from inferopt.planning import capacity


def test_seed_6_3_six_instances_48_gpus():
    plan = capacity.plan_instances(200, 50, surge_instances=1, redundancy="N+1", gpus_per_instance=8)
    assert (plan.base_instances, plan.surge_instances, plan.redundancy_instances) == (4, 1, 1)
    assert plan.instances == 6 and plan.gpus == 48
    assert plan.working[-1].endswith("= 6 instances x 8 GPUs = 48 GPUs")


def test_base_rounds_up_and_redundancy_options():
    assert capacity.plan_instances(201, 50, 0, "none").instances == 5
    assert capacity.plan_instances(200, 50, 0, "N+2").instances == 6
    assert capacity.plan_instances(10, 50, 0, "none", 1).gpus == 1


@pytest.mark.parametrize("kwargs", [
    dict(target_qps=0, per_instance_qps=50),
    dict(target_qps=200, per_instance_qps=-1),
    dict(target_qps=200, per_instance_qps=50, redundancy="N+7"),
    dict(target_qps=200, per_instance_qps=50, surge_instances=-1),
    dict(target_qps=200, per_instance_qps=50, gpus_per_instance=0),
])
def test_bad_input_says_what_to_change(kwargs):
    with pytest.raises(CourseError, match="must"):
        capacity.plan_instances(**kwargs)


def test_availability_binomial():
    # 5 instances, 4 needed, each up 99%: a^5 + 5 a^4 (1-a)
    a = 0.99
    av = capacity.availability(a, 5, 4, target=0.999)
    assert math.isclose(av.service_availability, a**5 + 5 * a**4 * (1 - a))
    assert av.meets_target is True
    # no spare: all 4 needed -> 0.99^4 ~ 96%, far below 99.9%
    bare = capacity.availability(a, 4, 4, target=0.999)
    assert math.isclose(bare.service_availability, a**4) and bare.meets_target is False
    assert bare.downtime_minutes_per_month == round((1 - a**4) * 43200, 2)


def test_allowed_downtime_for_three_nines():
    d = capacity.allowed_downtime(0.999)
    assert d["downtime_minutes_per_month"] == 43.2
    assert d["downtime_hours_per_year"] == 8.76


def test_availability_rejects_impossible():
    with pytest.raises(CourseError, match="cannot need more"):
        capacity.availability(0.99, 4, 5)
    with pytest.raises(CourseError, match="fraction"):
        capacity.availability(99.0, 4, 4)


def test_canary_steps_seed():
    steps = capacity.canary_steps((0.05, 0.5, 1.0), total_qps=50, ttft_p95_ms=500, tpot_p95_ms=50)
    assert [s.traffic_fraction for s in steps] == [0.05, 0.5, 1.0]
    assert [s.qps_on_new_version for s in steps] == [2.5, 25.0, 50.0]
    assert any("vllm:time_to_first_token_seconds" in w for w in steps[0].watch)
    assert any("500 ms" in r for r in steps[0].rollback_if)
    with pytest.raises(CourseError, match="end at 1.0"):
        capacity.canary_steps((0.05, 0.5))
    with pytest.raises(CourseError, match="increase"):
        capacity.canary_steps((0.5, 0.05, 1.0))


def test_cli_json():
    out = subprocess.run([sys.executable, "-m", "inferopt", "capacity", "--target-qps", "200",
                          "--per-instance-qps", "50", "--instance-availability", "0.99", "--json"],
                         capture_output=True, text=True, cwd=REPO_ROOT, check=True).stdout
    data = json.loads(out)
    assert data["instances"] == 6 and data["gpus"] == 48
    assert data["availability"]["meets_target"] is True
