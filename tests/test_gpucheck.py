"""`make gpu-check`'s dry run on CPU (tiny shapes, no GPU) and its refusals (serving/gpucheck.py)."""
import json

import pytest

from inferopt.errors import CourseError
from inferopt.serving import gpucheck
from inferopt.serving.gpu_commands import cpu_leaks


def test_dry_run_writes_both_records(tmp_path):
    paths = gpucheck.run(("1", "2"), dry_run=True, out=tmp_path)
    assert [p.name.split("-")[0] for p in paths] == ["part1", "part2"]
    assert all(p.parent == tmp_path for p in paths)                  # never into assets/ in a dry run
    p1, p2 = (json.loads(p.read_text()) for p in paths)
    for rec in (p1, p2):
        assert rec["dry_run"] is True
        assert set(rec["machine"]) >= {"gpu", "driver", "torch", "vllm", "date"}
    plan = p1["result"]["plan"]
    assert len(plan["cluster_06b"]) == 3 and plan["share_06b"]["engines"] == 3
    for argv in [plan["explicit_kv"], *plan["cluster_06b"]]:
        assert "--gpu-memory-utilization" in argv and not cpu_leaks(argv)
        assert argv[argv.index("--dtype") + 1] == "bfloat16"          # the plan is for an H100 (serving/gpu_flags.py)
    share = float(plan["cluster_06b"][0][plan["cluster_06b"][0].index("--gpu-memory-utilization") + 1])
    assert 3 * share <= 1 and share == plan["share_06b"]["gpu_memory_utilization"]
    r = p2["result"]
    rows = r["activation_peaks"]["rows"]
    assert {(x["layers"], x["tokens"]) for x in rows} == {(1, 16), (1, 64), (2, 16), (2, 64)}
    steps = r["decode_steps"]["rows"]
    assert [x["batch"] for x in steps] == [1, 4] and all(x["step_ms_measured_layers"] > 0 for x in steps)
    assert all(x["step_ms_full_model_estimate"] == pytest.approx(x["step_ms_per_layer"] * 32) for x in steps)
    assert [x["tokens"] for x in r["roofs"]["gemm"]] == [1, 16] and r["roofs"]["copy"]["gb_s"] > 0
    assert [x["batch"] for x in r["weight_stream"]["rows"]] == [1, 4] and r["weight_stream"]["cuda_graph"] is False


def test_without_a_gpu_the_real_run_refuses_in_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.fail("this test is for a CPU machine; on a GPU run `make gpu-check` itself")
    with pytest.raises(CourseError, match="--dry-run") as e:
        gpucheck.run(("2",), dry_run=False, out=tmp_path)
    assert "\n" not in str(e.value)
    with pytest.raises(CourseError, match="GPU build") as e:
        gpucheck.run(("1",), dry_run=False, out=tmp_path)
    assert not list(tmp_path.iterdir())


def test_the_gpu_check_notebook_runs_its_dry_run_in_ci():
    """Chapter 00b's GPU-check cell is what CI's strict nbval executes (pyproject testpaths: chapters): without a GPU
    it runs both parts as the dry run, and asserts the records say so."""
    import tomllib

    from inferopt.paths import REPO_ROOT
    from inferopt.serving.gpu_commands import notebook_code

    code = notebook_code(REPO_ROOT / "chapters" / "00b-gpu-and-hosted.md")
    assert "dry = not gpu_present()" in code and 'gpucheck.run(("1", "2"), dry_run=dry)' in code
    assert 'json.loads(p.read_text())["dry_run"] for p in written] == [dry, dry]' in code
    ini = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "chapters" in ini["testpaths"] and "--nbval" in ini["addopts"].split()
