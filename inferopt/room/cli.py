"""``python -m inferopt room serve | measure``: the workshop room's server (inferopt/room/hub.py, ``make room``)
and its capacity (inferopt/room/capacity.py)."""
from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT
from inferopt.room import capacity, hub
from inferopt.room.hub import DEFAULT_ROOM, Room, chp_command


def add_subcommand(sub) -> None:
    p = sub.add_parser("room", help="the workshop room: serve the course with JupyterHub, or measure its capacity",
                       description=hub.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rs = p.add_subparsers(dest="room_command", required=True)
    s = rs.add_parser("serve", help="JupyterHub + the room engine(s), until Ctrl-C (make room)")
    s.add_argument("--ip", default="127.0.0.1", help="address to serve on (default loopback; the room's LAN "
                   "address or 0.0.0.0 to serve the room)")
    s.add_argument("--port", type=int, default=8000, help="the hub's port (default 8000)")
    s.add_argument("--engine-url", action="append", default=None,
                   help="attach learners to this running engine instead of starting one (repeatable)")
    s.add_argument("--engines", type=int, default=1, help="room engines to start (default 1)")
    s.add_argument("--engine-cores", type=int, default=2, help="cores per room engine (default 2)")
    s.add_argument("--learner-cores", type=int, default=1, help="cores per learner (default 1)")
    s.add_argument("--learner-mem-gib", type=float, default=8.0,
                   help="address-space limit per learner process, GiB (default 8; 0: none)")
    s.add_argument("--room-dir", default=str(DEFAULT_ROOM), help="learners' folders, hand-ins, the hub's state")
    s.add_argument("--pack", default=str(REPO_ROOT / "build" / "learner-pack.tar.gz"))
    s.add_argument("--policy", choices=["refuse", "none"], default="refuse",
                   help="a learner's own engine start: refuse (default: one line naming the room engine) or none "
                   "(learners may start engines: each takes its own memory and cores)")
    s.add_argument("--share-references", action="store_true",
                   help="give the learners' check cells the checks' references (INFEROPT_REFERENCES: this checkout's "
                   "inferopt/labcheck; whoever can read it can read the formulas: INSTRUCTORS.md, 'The learner pack')")
    s.add_argument("--password", default=None, help="the room's password (default: $INFEROPT_ROOM_PASSWORD, "
                   "else the one in <room-dir>/password, else a new one)")
    s.set_defaults(func=_serve)
    m = rs.add_parser("measure", help="a learner session's RSS and CPU, learners per engine and per server")
    capacity.add_arguments(m)
    m.set_defaults(func=capacity.cli)


def _serve(a) -> int:
    for n, what in ((a.engines, "--engines"), (a.engine_cores, "--engine-cores"), (a.learner_cores, "--learner-cores")):
        if n < (0 if what == "--engines" else 1):
            raise CourseError(f"{what} {n}: give a whole number of at least {0 if what == '--engines' else 1}")
    if not Path(a.pack).is_file():
        raise CourseError(f"the learner pack {a.pack} is missing: build it with `make learner-pack` (make room does), "
                          "or pass --pack PATH")
    chp_command()
    room = Room(a.room_dir, ip=a.ip, port=a.port, engine_urls=a.engine_url, engines=a.engines,
                engine_cores=a.engine_cores, cores_per_learner=a.learner_cores, mem_gib=a.learner_mem_gib,
                password=a.password, pack=a.pack, policy="" if a.policy == "none" else a.policy,
                references=REPO_ROOT / "inferopt" / "labcheck" if a.share_references else None)
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(1))
    print(f"starting the room in {room.room_dir} (engines first: about a minute)", flush=True)
    room.start()
    try:
        print(f"the room is up: {room.url}/  (sign in with any name and the password {room.password})")
        print(f"room engine(s): {', '.join(room.engine_urls)}; learners' cores: {room.learner_cores} "
              f"({room.cores_per_learner} each); hub log: {room.room_dir / 'jupyterhub.log'}")
        print("Ctrl-C stops the hub, every learner's server and kernels, and the engine(s)", flush=True)
        while not stop and room.hub.proc.poll() is None:
            time.sleep(0.5)
        if room.hub.proc.poll() is not None:
            print(f"JupyterHub exited (code {room.hub.proc.returncode}): see {room.room_dir / 'jupyterhub.log'}")
            return 1
    finally:
        room.stop()
        print("the room is stopped")
    return 0
