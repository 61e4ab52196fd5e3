"""Kubernetes manifests for a deployment plan, and the checks that keep them honest.

    from inferopt.planning.planner import make_plan
    from inferopt.planning.k8s import manifests, validate, write_manifests
    objs = manifests(make_plan("llama3-70b-chat"), canary_weight=5)
    validate(objs, make_plan("llama3-70b-chat"))     # schema + plan checks; CourseError on the first problem
    write_manifests(plan, "k8s/")                    # what ``python -m inferopt plan --k8s k8s/`` does

What is written (one YAML file per object, plus a Dockerfile for the router image):
- two engine Deployments, ``vllm-engine-stable`` and ``vllm-engine-canary`` (the canary runs the
  new image tag), each pod one ``vllm serve`` of the plan's command asking for the GPUs that command
  holds (``nvidia.com/gpu``: its TP; an instance of ``gpus_per_instance`` GPUs is
  :func:`replicas_per_instance` pods, e.g. 4 pods of TP=2 for chapter 05's shipped plan), with the planner's
  flags, readiness and liveness probes on ``/health`` (plus a
  start-up probe: a 70B model takes minutes to load), ``/dev/shm`` for tensor parallelism, and
  Prometheus scrape annotations for ``/metrics``;
- a PodDisruptionBudget over all engine pods with ``minAvailable`` = the pods of the instances the
  peak needs, so a node drain can take at most the N+1 spare instance's pods away at once;
- vLLM's router (``vllm-router``) per track, with Kubernetes service discovery of the engine
  pods by label (``--service-discovery --selector``), cache-aware routing, and its RBAC
  (ServiceAccount, Role to list/watch pods, RoleBinding);
- the canary split: vllm-router has no per-worker weights, so an nginx gateway with weighted
  upstreams (``weight=`` per router Service) in front of the two routers; Services for all.

Validation is offline: every object against the Kubernetes API's OpenAPI schemas bundled in
PyPI ``kubernetes-validate`` (strict: unknown fields fail too), then against the plan (the
schema cannot know that a pod needs 8 GPUs or that the PDB must keep N+1).
"""
from __future__ import annotations

from pathlib import Path

import yaml

from inferopt.errors import CourseError
from inferopt.planning.capacity import check_canary_weight, check_instances

K8S_VERSION = "1.37.0"          # the newest API schema bundled in kubernetes-validate 1.37.0
VLLM_IMAGE = "vllm/vllm-openai"
GPU_RESOURCE = "nvidia.com/gpu"
ENGINE_PORT = 8000
ROUTER_PORT = 8000
ROUTER_METRICS_PORT = 29000
ROUTER_DOCKERFILE = """\
# vLLM's router image: the PyPI wheel carries the Rust binary as a Python extension.
FROM python:3.12-slim
RUN pip install --no-cache-dir vllm-router==0.1.17
ENTRYPOINT ["vllm-router"]
"""


def _labels(track: str | None = None, app: str = "vllm-engine") -> dict:
    d = {"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "inferopt"}
    if track:
        d["inferopt/track"] = track
    return d


def _meta(name: str, ns: str, labels: dict, **extra) -> dict:
    return {"name": name, "namespace": ns, "labels": labels, **extra}


def gpus_per_pod(plan) -> int:
    """GPUs one ``vllm serve`` of the plan's command holds: its tensor-parallel size (times its pipeline stages)."""
    flags = plan.command.flags

    def size(flag: str) -> int:
        return int(flags[flags.index(flag) + 1]) if flag in flags else 1

    return size("--tensor-parallel-size") * size("--pipeline-parallel-size")


def replicas_per_instance(plan) -> int:
    """Engine pods per instance: the instance's GPUs over the GPUs one command holds (1 for TP=8 on 8 GPUs, 4 for
    TP=2 on 8 GPUs); CourseError when the command does not divide the instance."""
    gpus, per = plan.capacity.gpus_per_instance, gpus_per_pod(plan)
    if gpus % per:
        raise CourseError(f"the plan's command holds {per} GPUs, which does not divide an instance of {gpus}: "
                          "choose a tensor-parallel size that divides the instance's GPUs")
    return gpus // per


def _engine_deployment(plan, ns: str, track: str, replicas: int, image: str) -> dict:
    gpus = gpus_per_pod(plan)
    # the planner's `vllm serve MODEL --flags ...`, served on all pod addresses
    serve = plan.command.serve_argv
    model, flags = serve[2], list(serve[3:])
    if "--pipeline-parallel-size" in flags:
        raise CourseError("plan --k8s: this plan spans nodes (--pipeline-parallel-size); one Deployment pod cannot "
                          "hold it: run it with a LeaderWorkerSet and Ray (vLLM's multi-node guide), or choose a "
                          "plan that fits one node")
    if "--port" in flags:
        i = flags.index("--port")
        del flags[i:i + 2]
    args = [model, *flags, "--host", "0.0.0.0", "--port", str(ENGINE_PORT)]
    probe = {"httpGet": {"path": "/health", "port": ENGINE_PORT}}
    labels = _labels(track)
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(f"vllm-engine-{track}", ns, labels),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": labels, "annotations": {
                    "prometheus.io/scrape": "true", "prometheus.io/port": str(ENGINE_PORT),
                    "prometheus.io/path": "/metrics"}},
                "spec": {
                    "terminationGracePeriodSeconds": 60,
                    "containers": [{
                        "name": "vllm",
                        "image": image,
                        "command": ["vllm", "serve"],
                        "args": args,
                        "ports": [{"name": "http", "containerPort": ENGINE_PORT}],
                        "resources": {"requests": {GPU_RESOURCE: gpus}, "limits": {GPU_RESOURCE: gpus}},
                        "startupProbe": {**probe, "periodSeconds": 10, "failureThreshold": 90},
                        "readinessProbe": {**probe, "periodSeconds": 5, "failureThreshold": 3},
                        "livenessProbe": {**probe, "periodSeconds": 15, "failureThreshold": 4},
                        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                    }],
                    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}],
                },
            },
        },
    }


def _router(ns: str, track: str, image: str, replicas: int = 2) -> list[dict]:
    labels = _labels(track, app="vllm-router")
    selector = [f"{k}={v}" for k, v in _labels(track).items()]
    args = ["--host", "0.0.0.0", "--port", str(ROUTER_PORT), "--policy", "cache_aware",
            "--service-discovery", "--selector", *selector,
            "--service-discovery-port", str(ENGINE_PORT), "--service-discovery-namespace", ns,
            "--prometheus-host", "0.0.0.0", "--prometheus-port", str(ROUTER_METRICS_PORT),
            "--health-check-endpoint", "/health"]
    probe = {"httpGet": {"path": "/health", "port": ROUTER_PORT}}
    dep = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(f"vllm-router-{track}", ns, labels),
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels, "annotations": {
                "prometheus.io/scrape": "true", "prometheus.io/port": str(ROUTER_METRICS_PORT),
                "prometheus.io/path": "/metrics"}},
            "spec": {"serviceAccountName": "vllm-router", "containers": [{
                "name": "router", "image": image, "args": args,
                "ports": [{"name": "http", "containerPort": ROUTER_PORT},
                          {"name": "metrics", "containerPort": ROUTER_METRICS_PORT}],
                "resources": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
                "readinessProbe": {**probe, "periodSeconds": 5},
                "livenessProbe": {**probe, "periodSeconds": 15},
            }]}}},
    }
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": _meta(f"vllm-router-{track}", ns, labels),
           "spec": {"selector": labels, "ports": [{"name": "http", "port": ROUTER_PORT, "targetPort": "http"}]}}
    return [dep, svc]


def _rbac(ns: str) -> list[dict]:
    labels = _labels(app="vllm-router")
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta("vllm-router", ns, labels)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta("vllm-router", ns, labels),
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": _meta("vllm-router", ns, labels),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "vllm-router"},
         "subjects": [{"kind": "ServiceAccount", "name": "vllm-router", "namespace": ns}]},
    ]


def nginx_split_conf(canary_weight: float) -> str:
    """nginx config: weighted upstream over the stable and canary routers (integer weights summing to 100)."""
    w = check_canary_weight(canary_weight)
    canary = round(w)
    servers = []
    if canary < 100:
        servers.append(f"    server vllm-router-stable:{ROUTER_PORT} weight={100 - canary};")
    if canary > 0:
        servers.append(f"    server vllm-router-canary:{ROUTER_PORT} weight={canary};")
    return ("upstream vllm_routers {\n" + "\n".join(servers) + "\n}\n"
            "server {\n    listen 8080;\n    location / {\n        proxy_pass http://vllm_routers;\n"
            "        proxy_http_version 1.1;\n        proxy_buffering off;\n        proxy_read_timeout 600s;\n"
            "        proxy_next_upstream error timeout http_502 http_503;\n    }\n"
            "    location = /healthz { return 200; }\n}\n")


def _gateway(ns: str, canary_weight: float) -> list[dict]:
    labels = _labels(app="llm-gateway")
    conf = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("llm-gateway", ns, labels),
            "data": {"default.conf": nginx_split_conf(canary_weight)}}
    probe = {"httpGet": {"path": "/healthz", "port": 8080}}
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta("llm-gateway", ns, labels),
           "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
               "metadata": {"labels": labels},
               "spec": {"containers": [{
                   "name": "nginx", "image": "nginx:1.27",
                   "ports": [{"name": "http", "containerPort": 8080}],
                   "volumeMounts": [{"name": "conf", "mountPath": "/etc/nginx/conf.d"}],
                   "readinessProbe": probe, "livenessProbe": probe}],
                   "volumes": [{"name": "conf", "configMap": {"name": "llm-gateway"}}]}}}}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": _meta("llm-gateway", ns, labels),
           "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}
    return [conf, dep, svc]


def canary_replicas(instances: int, canary_weight: float) -> int:
    """Engine instances given to the canary: enough for its share of the traffic, at least one
    while it gets any traffic, all of them at 100 %."""
    import math

    w = check_canary_weight(canary_weight)
    if w == 0:
        return 0
    return min(instances, max(1, math.ceil(round(instances * w / 100.0, 9))))


def needed_instances(plan) -> int:
    """Instances that must be up to carry the peak: base + surge (the N of N+1)."""
    return plan.capacity.base_instances + plan.capacity.surge_instances


def needed_pods(plan) -> int:
    """Engine pods that must be up to carry the peak: the needed instances' pods (the PDB's minAvailable)."""
    return needed_instances(plan) * replicas_per_instance(plan)


def manifests(plan, *, canary_weight: float = 5, namespace: str = "inferopt", instances: int | None = None,
              stable_image: str = f"{VLLM_IMAGE}:v0.32.0", canary_image: str = f"{VLLM_IMAGE}:v0.33.0",
              router_image: str = "REGISTRY/vllm-router:0.1.17") -> list[dict]:
    """All Kubernetes objects for ``plan`` (a planner.DeploymentPlan with a capacity section).

    ``instances`` overrides the plan's instance count; it must stay at least N+1. Each instance is
    :func:`replicas_per_instance` engine pods; the canary's pods follow its weight over all of them."""
    if plan.capacity is None:
        raise CourseError("this plan has no capacity section (target QPS, per-instance QPS, redundancy): "
                          "add one to the scenario file to size the deployment")
    needed = needed_instances(plan)
    instances = check_instances(plan.capacity.instances if instances is None else instances, needed)
    pods = instances * replicas_per_instance(plan)
    n_canary = canary_replicas(pods, canary_weight)
    objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": _labels(app="inferopt")}}]
    objs += _rbac(namespace)
    objs.append(_engine_deployment(plan, namespace, "stable", pods - n_canary, stable_image))
    objs.append(_engine_deployment(plan, namespace, "canary", n_canary, canary_image))
    objs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": _meta("vllm-engine", namespace, _labels()),
                 "spec": {"minAvailable": needed_pods(plan),
                          "selector": {"matchLabels": _labels()}}})
    for track in ("stable", "canary"):
        objs += _router(namespace, track, router_image)
    objs += _gateway(namespace, canary_weight)
    return objs


# ---------------------------------------------------------------- validation
def schema_check(obj: dict, version: str = K8S_VERSION) -> None:
    """One object against the Kubernetes OpenAPI schema (offline, strict); CourseError naming the problem."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path) or "(top level)"
        raise CourseError(f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}: field {where}: "
                          f"{exc.message}") from None
    except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as exc:
        raise CourseError(f"{obj.get('kind')}: no Kubernetes {version} schema for it ({exc})") from None


def _matches(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


# flags whose value must be the plan's: the model dtype and the KV dtype are what the plan's GPU runs
VALUE_CHECKED = ("--dtype", "--kv-cache-dtype", "--tensor-parallel-size")


def plan_check(objs: list[dict], plan) -> None:
    """The manifests against the plan: GPUs per pod, flags, probes, scrape annotations, N+1 PDB, split."""
    per_pod, per_instance = gpus_per_pod(plan), replicas_per_instance(plan)
    engines = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("vllm-engine-")]
    if not engines:
        raise CourseError("no engine Deployment (vllm-engine-*) in the manifests")
    total = 0
    for dep in engines:
        name = dep["metadata"]["name"]
        pod = dep["spec"]["template"]
        c = pod["spec"]["containers"][0]
        res = c.get("resources") or {}
        for kind in ("requests", "limits"):
            got = (res.get(kind) or {}).get(GPU_RESOURCE)
            if got != per_pod:
                raise CourseError(f"{name}: {kind} {GPU_RESOURCE} is {got!r}, the plan's command holds "
                                  f"{per_pod} GPUs per engine pod")
        args = c.get("args") or []
        flags = plan.command.flags
        for i, flag in enumerate(flags):
            if flag.startswith("--") and flag != "--port" and flag not in args:
                raise CourseError(f"{name}: the planner's vLLM flag {flag} is missing from the container args")
            value = flags[i + 1] if flag in VALUE_CHECKED and i + 1 < len(flags) else None
            j = args.index(flag) if value is not None else -1
            if value is not None and (j + 1 >= len(args) or args[j + 1] != value):
                raise CourseError(f"{name}: the container runs {flag} {args[j + 1] if j + 1 < len(args) else '(none)'}"
                                  f", the plan's command {flag} {value} (its GPU's: inferopt.planning.hardware)")
        for p in ("readinessProbe", "livenessProbe"):
            if (c.get(p) or {}).get("httpGet", {}).get("path") != "/health":
                raise CourseError(f"{name}: {p} must be an HTTP GET on /health (vLLM's health endpoint)")
        ann = pod["metadata"].get("annotations") or {}
        if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/path") != "/metrics":
            raise CourseError(f"{name}: pods need prometheus.io/scrape 'true' and path /metrics to be monitored")
        total += dep["spec"]["replicas"]
    needed = needed_instances(plan)
    if per_instance == 1:
        check_instances(total, needed)
    elif total < (needed + 1) * per_instance:
        raise CourseError(f"{total} engine pods ({per_instance} per instance) cannot survive losing one instance: the "
                          f"load needs {needed} instances, so N+1 means at least {(needed + 1) * per_instance} pods. "
                          "Raise the replica count.")
    needed = needed * per_instance
    pdbs = [o for o in objs if o["kind"] == "PodDisruptionBudget"]
    if len(pdbs) != 1:
        raise CourseError(f"expected one PodDisruptionBudget over the engines, found {len(pdbs)}")
    spec = pdbs[0]["spec"]
    for dep in engines:
        if not _matches(spec.get("selector") or {}, dep["spec"]["template"]["metadata"]["labels"]):
            raise CourseError(f"the PodDisruptionBudget's selector does not select {dep['metadata']['name']}'s pods")
    if spec.get("minAvailable") != needed or "maxUnavailable" in spec:
        raise CourseError(f"PodDisruptionBudget minAvailable is {spec.get('minAvailable')!r}: N+1 keeps the "
                          f"{needed} engine pods the peak needs available (more blocks every drain, fewer lets "
                          f"a drain take more than the spare)")
    conf = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "llm-gateway"]
    if conf:
        import re

        weights = [int(w) for w in re.findall(r"weight=(\d+);", conf[0]["data"]["default.conf"])]
        if sum(weights) != 100:
            raise CourseError(f"the canary split's weights {weights} do not add up to 100")


def validate(objs: list[dict], plan, version: str = K8S_VERSION) -> int:
    """Schema-check every object, then check them against the plan. Returns the number of objects."""
    for o in objs:
        schema_check(o, version)
    plan_check(objs, plan)
    return len(objs)


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def to_yaml(obj: dict) -> str:
    """One object as plain YAML (no &anchors, keys in the order written)."""
    return yaml.dump(obj, Dumper=_NoAliases, sort_keys=False)


def write_manifests(plan, directory, **kw) -> list[Path]:
    """Validate and write one YAML per object (``NN-kind-name.yaml``) plus ``Dockerfile.router``."""
    objs = manifests(plan, **kw)
    validate(objs, plan)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, o in enumerate(objs):
        p = out / f"{i:02d}-{o['kind'].lower()}-{o['metadata']['name']}.yaml"
        p.write_text(to_yaml(o))
        paths.append(p)
    p = out / "Dockerfile.router"
    p.write_text(ROUTER_DOCKERFILE)
    paths.append(p)
    return paths


def load_dir(directory) -> list[dict]:
    """The objects of a manifests folder written by write_manifests (for re-validation)."""
    return [yaml.safe_load(p.read_text()) for p in sorted(Path(directory).glob("*.yaml"))]
