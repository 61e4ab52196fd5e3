"""Async load generator for any OpenAI-compatible endpoint (vLLM on CPU or GPU, a remote server).

Two ways to offer load:
- closed loop (``concurrency=N``): N workers, each sends its next request as soon as its last one
  finished, so N requests are always in flight (genai-perf/aiperf ``--concurrency``,
  ``vllm bench serve --max-concurrency`` with an infinite rate);
- open loop (``rate=R`` req/s): requests are sent at Poisson arrival times whatever the server's
  state (``vllm bench serve --request-rate``); ``concurrency`` then caps requests in flight.
  ``schedule=[(t_s, spec), ...]`` sends given requests at given times; a time can also be an
  :class:`AfterTokens` event, "once every request tagged T has streamed k tokens" (the branch-D
  experiment: a long prompt that joins streams while they decode, on a fast machine or a slow one).

Every request streams (``stream=True`` with usage in the last chunk) and asks for
``ignore_eos`` so the output has exactly ``max_tokens`` tokens. Warm-up requests are sent first
and not recorded. A run stops sending after ``max_requests`` or ``duration_s``.
``on_record`` is called as each request completes (results.ResultWriter saves it at once).

The client's own CPU cost is measured (``RunResult.client_cpu_s_per_request``) so a load test can
show it was not the bottleneck. Works inside Jupyter (runs its event loop in a worker thread).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import random
import threading
import time
from dataclasses import dataclass, field

from inferopt.bench.metrics import SLO, RequestRecord, summarize
from inferopt.bench.workload import RequestSpec
from inferopt.errors import CourseError


@dataclass(frozen=True)
class Endpoint:
    """Where to send requests. ``base_url`` without ``/v1`` (e.g. ``http://127.0.0.1:8000``)."""
    base_url: str
    model: str
    api_key: str | None = None
    api: str = "completions"          # 'completions' (exact prompt tokens) or 'chat'
    ignore_eos: bool = True           # vLLM extension; set False for servers that reject it
    timeout_s: float = 600.0

    def __post_init__(self):
        if self.api not in ("completions", "chat"):
            raise CourseError(f"api={self.api!r}: use 'completions' or 'chat'")
        if not self.base_url.startswith(("http://", "https://")):
            raise CourseError(f"base_url={self.base_url!r}: give a URL such as http://127.0.0.1:8000")

    @classmethod
    def from_server(cls, srv, **kw) -> Endpoint:
        """The endpoint of a running inferopt.serving.engine.VLLMServer."""
        return cls(base_url=srv.base_url, model=srv.model_name, **kw)

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        if base.endswith("/v1"):
            base = base[:-3]
        return base + ("/v1/completions" if self.api == "completions" else "/v1/chat/completions")

    def headers(self) -> dict:
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def payload(self, spec: RequestSpec) -> dict:
        body = {"model": self.model, "max_tokens": spec.max_tokens, "temperature": 0.0, "stream": True,
                "stream_options": {"include_usage": True}}
        if self.ignore_eos:
            body["ignore_eos"] = True
        if self.api == "completions":
            body["prompt"] = spec.prompt
        else:
            body["messages"] = [{"role": "user", "content": spec.prompt}]
        return body


@dataclass(frozen=True)
class AfterTokens:
    """A send time given as an event: once every request sent at a clock time and tagged ``tag`` has
    streamed ``tokens`` tokens (or ended). Where a clock time would read the machine's speed (a fast engine ends
    short streams before a fixed 2 s), this arrives at the same point of the streams on any machine."""
    tag: str
    tokens: int

    def __post_init__(self):
        if not isinstance(self.tokens, int) or self.tokens < 1:
            raise CourseError(f"AfterTokens(tokens={self.tokens!r}): give a whole number of tokens, 1 or more")


def _order(at) -> tuple:
    """Sort key of a schedule entry: clock times first, in order, then the events."""
    return (1, 0.0) if isinstance(at, AfterTokens) else (0, float(at))


@dataclass
class RunResult:
    """Records of one run plus its wall time (first send → last completion) and client CPU."""
    records: list[RequestRecord]
    duration_s: float
    client_cpu_s: float
    labels: dict = field(default_factory=dict)

    @property
    def client_cpu_s_per_request(self) -> float:
        return self.client_cpu_s / max(1, len(self.records))

    def summary(self, slo: SLO | None = None) -> dict:
        s = summarize(self.records, duration_s=self.duration_s, slo=slo, **self.labels)
        s["client_cpu_ms_per_request"] = 1000.0 * self.client_cpu_s_per_request
        return s


async def _send(session, ep: Endpoint, spec: RequestSpec, rid: int, t0: float, on_chunk=None) -> RequestRecord:
    import aiohttp

    rec = RequestRecord(request_id=rid, prompt_tokens=spec.prompt_tokens, output_tokens=0, tag=spec.tag)
    st = time.perf_counter()
    rec.start_s = st - t0
    last = st
    chunks = 0
    try:
        async with session.post(ep.url, json=ep.payload(spec), headers=ep.headers()) as resp:
            if resp.status != 200:
                text = (await resp.text())[:300]
                rec.error = f"HTTP {resp.status}: {text}"
                return rec
            buf = b""
            async for piece in resp.content.iter_any():
                arrived = time.perf_counter()   # a chunk's time is when its bytes came, not when it was parsed
                buf += piece
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    line = line.strip()
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        continue
                    msg = json.loads(data)
                    if msg.get("choices"):
                        now = arrived
                        if rec.ttft_s is None:
                            rec.ttft_s = now - st
                        else:
                            rec.itl_s.append(now - last)
                        last = now
                        chunks += 1
                        if on_chunk is not None:
                            on_chunk(rid, chunks)
                    if msg.get("usage"):
                        usage = msg["usage"]
                        rec.output_tokens = usage.get("completion_tokens") or rec.output_tokens
                        rec.prompt_tokens = usage.get("prompt_tokens") or rec.prompt_tokens
            if rec.ttft_s is None:
                rec.error = "the stream ended without a single token"
            else:
                rec.e2e_s = last - st
                if not rec.output_tokens:   # server sent no usage: count chunks
                    rec.output_tokens = chunks
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        rec.error = f"{type(exc).__name__}: {exc}"
    return rec


class _TextProgress:
    """Progress as one text line that a notebook updates in place (``display_id``).

    A tqdm widget is stored in the notebook as its *first* state ("0%"), because the stored
    ``text/plain`` is taken when it is displayed; an updated display keeps the *last* one, so a
    reader of the stored notebook (GitHub, the HTML book) sees "12/12 requests done". The line
    carries no timings, so it reads the same on every run."""

    def __init__(self, total: int, desc: str):
        from IPython.display import display

        self.total, self.desc, self.n, self.failed = total, desc, 0, 0
        self.handle = display({"text/plain": self._text()}, raw=True, display_id=True)

    def _text(self) -> str:
        state = "done" if self.n >= self.total else "..."
        failed = f" ({self.failed} failed)" if self.failed else ""
        return f"{self.desc}: {self.n}/{self.total} requests {state}{failed}"

    def update(self, n: int = 1, failed: bool = False) -> None:
        self.n += n
        self.failed += int(failed)
        self.handle.update({"text/plain": self._text()}, raw=True)

    def close(self) -> None:
        self.handle.update({"text/plain": self._text()}, raw=True)


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and hasattr(ip, "kernel")


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    if _in_notebook():
        return _TextProgress(total, desc)
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, leave=False)


async def _run_async(ep, requests, concurrency, rate, schedule, warmup, duration_s, on_record,
                     progress, seed, desc, stop_when=None) -> RunResult:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=ep.timeout_s)
    limit = max(1, concurrency or 0, len(schedule or []), 64 if rate else 0)
    # idle connections are dropped by the client before vLLM's server drops them (VLLM_HTTP_TIMEOUT_KEEP_ALIVE,
    # vllm/envs.py, 5 s by default; aiohttp keeps them 15 s): otherwise a request sent on a connection the server is
    # closing at that moment fails with "Server disconnected", which an open loop's idle gaps of a few seconds hit
    server_keep_alive_s = float(os.environ.get("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "5"))
    conn = aiohttp.TCPConnector(limit=limit, force_close=False, keepalive_timeout=server_keep_alive_s / 2)
    async with aiohttp.ClientSession(timeout=timeout, connector=conn) as session:
        # warm-up: short requests, not recorded
        for i in range(warmup):
            spec = RequestSpec(prompt=f" warm up request number {i}", prompt_tokens=0, max_tokens=4)
            w = await _send(session, ep, spec, -1 - i, time.perf_counter())
            if w.error:
                raise CourseError(f"warm-up request to {ep.url} failed: {w.error}. Is the server up, the model "
                                  f"name {ep.model!r} right, and the API key set if it needs one?")
        records: list[RequestRecord] = []
        bar = _progress(len(schedule) if schedule else len(requests), progress, desc)
        cpu0, t0 = time.process_time(), time.perf_counter()

        def done(rec):
            records.append(rec)
            if isinstance(bar, _TextProgress):
                bar.update(1, failed=not rec.ok)
            elif bar is not None:
                bar.update(1)
            if on_record is not None:
                on_record(rec)

        if schedule is None and rate is None:            # closed loop
            queue = list(enumerate(requests))
            queue.reverse()

            async def worker():
                while queue:
                    if duration_s is not None and time.perf_counter() - t0 >= duration_s:
                        return
                    if stop_when is not None and stop_when():
                        return
                    rid, spec = queue.pop()
                    done(await _send(session, ep, spec, rid, t0))

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        else:                                            # open loop
            if schedule is None:
                rng = random.Random(f"arrivals-{seed}")
                t, schedule = 0.0, []
                for spec in requests:
                    schedule.append((t, spec))
                    t += rng.expovariate(rate)
            sem = asyncio.Semaphore(concurrency) if concurrency else None
            sent = [i for i, (at, _) in enumerate(schedule)
                    if duration_s is None or isinstance(at, AfterTokens) or at < duration_s]
            streamed = {i: 0 for i in sent if not isinstance(schedule[i][0], AfterTokens)}
            ended: set = set()
            waits = {at: (asyncio.Event(), [i for i in streamed if schedule[i][1].tag == at.tag])
                     for at, _ in schedule if isinstance(at, AfterTokens)}   # each event: its flag, the requests it waits on

            def check_events():
                for ev, (flag, mine) in waits.items():
                    if not flag.is_set() and all(i in ended or streamed[i] >= ev.tokens for i in mine):
                        flag.set()

            def on_chunk(rid, n):
                if rid in streamed:
                    streamed[rid] = n
                    check_events()

            # once stop_when says so, the requests still waiting for their send time (or event) return at once:
            # the run ends with the last request under way, not at the schedule's last send time
            stopped = asyncio.Event()

            def stop_now() -> bool:
                if not stopped.is_set() and stop_when is not None and stop_when():
                    stopped.set()
                return stopped.is_set()

            async def until(flag, timeout=None):
                """Wait for ``flag`` (None: only the time-out) or for the run to stop, whichever comes first."""
                waiters = [asyncio.ensure_future(stopped.wait())]
                if flag is not None:
                    waiters.append(asyncio.ensure_future(flag.wait()))
                _, pending = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                for w in pending:
                    w.cancel()

            async def fire(rid, at, spec):
                try:
                    if isinstance(at, AfterTokens):
                        await until(waits[at][0])
                    else:
                        delay = at - (time.perf_counter() - t0)
                        if delay > 0:
                            await until(None, delay)
                    if stop_now():
                        return
                    if sem is None:
                        done(await _send(session, ep, spec, rid, t0, on_chunk))
                    else:
                        async with sem:
                            done(await _send(session, ep, spec, rid, t0, on_chunk))
                    stop_now()                   # a finished request may be the one stop_when waits for
                finally:
                    ended.add(rid)
                    check_events()

            tasks = [fire(i, *schedule[i]) for i in sent]
            await asyncio.gather(*tasks)
        duration = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        if bar is not None:
            bar.close()
    records.sort(key=lambda r: r.request_id)
    return RunResult(records=records, duration_s=duration, client_cpu_s=cpu)


def _run_coro(make_coro):
    """Run a coroutine to completion from sync code, also inside Jupyter's running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coro())
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(lambda: asyncio.run(make_coro())).result()


def run(endpoint: Endpoint, requests=None, *, concurrency: int | None = None, rate: float | None = None,
        schedule=None, warmup: int = 0, max_requests: int | None = None, duration_s: float | None = None,
        on_record=None, progress: bool = True, seed: int = 0, desc: str = "requests", stop_when=None,
        **labels) -> RunResult:
    """Send ``requests`` (list of RequestSpec) to ``endpoint`` and return their records.

    Give ``concurrency`` (closed loop), or ``rate`` in requests/s (open loop, Poisson arrivals,
    ``concurrency`` then caps requests in flight), or ``schedule=[(send_at_s, RequestSpec), ...]``
    (``send_at_s`` a time in seconds from the start, or an :class:`AfterTokens` event).
    ``stop_when``: a function of no arguments, asked before each request is sent and after each one ends;
    once it returns True no further request is sent (those under way finish and are recorded), and an open
    loop's requests still waiting for their send time are dropped at once: the run ends with the last
    request under way, not at the schedule's last send time.
    ``labels`` (e.g. concurrency=4) are copied into the summary."""
    if schedule is None:
        if not requests:
            raise CourseError("no requests to send: build them with bench.workload.build_requests(...)")
        if rate is None and not concurrency:
            raise CourseError("give concurrency=N (closed loop) or rate=R requests/s (open loop)")
        if rate is not None and rate <= 0:
            raise CourseError(f"rate={rate}: give a positive number of requests per second")
        if concurrency is not None and concurrency < 1:
            raise CourseError(f"concurrency={concurrency}: give 1 or more requests in flight")
        if max_requests is not None:
            requests = list(requests)[:max_requests]
    else:
        schedule = sorted(schedule, key=lambda p: _order(p[0]))
        for at, _ in schedule:
            if isinstance(at, AfterTokens) and not any(spec.tag == at.tag for t, spec in schedule
                                                       if not isinstance(t, AfterTokens)):
                raise CourseError(f"{at}: no request sent at a clock time has the tag {at.tag!r}; tag the "
                                  "requests it waits for (build_requests(..., tag=...))")
    result = _run_coro(lambda: _run_async(endpoint, list(requests or []), concurrency, rate, schedule, warmup,
                                          duration_s, on_record, progress, seed, desc, stop_when))
    result.labels = {k: v for k, v in {"concurrency": concurrency, "rate": rate, **labels}.items() if v is not None}
    return result


def spaced_run(endpoints: list, requests, gap_s: float) -> RunResult:
    """Send ``requests`` one every ``gap_s`` seconds, the i-th to ``endpoints[i % len(endpoints)]`` (the split a
    gateway's smooth weighted round-robin makes at 50 %: it alternates), each endpoint's share from a thread of its
    own, all started together: one run, its records in the order sent, as long as its longest share (each share's
    client CPU is the process's, every thread included, so the longest share's figure covers the run)."""
    requests = list(requests)
    if not endpoints or not requests or gap_s < 0:
        raise CourseError(f"spaced_run: {len(endpoints)} endpoint(s), {len(requests)} request(s), gap {gap_s} s; "
                          "give one endpoint or more, one request or more and a gap of 0 s or more")
    k_of = len(endpoints)
    runs: dict = {}

    def send(k):
        runs[k] = run(endpoints[k], schedule=[(i * gap_s, r) for i, r in enumerate(requests) if i % k_of == k],
                      progress=False)
    sending = [threading.Thread(target=send, args=(k,)) for k in range(min(k_of, len(requests)))]
    for t in sending:
        t.start()
    for t in sending:
        t.join()
    if len(runs) == 1:
        return runs[0]
    longest = max(runs.values(), key=lambda r: r.duration_s)
    return RunResult(records=sorted((rec for r in runs.values() for rec in r.records), key=lambda rec: rec.start_s),
                     duration_s=longest.duration_s, client_cpu_s=longest.client_cpu_s)
