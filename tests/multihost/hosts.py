"""Separate hosts on one machine: each host a Linux network namespace with an address of its
own on a bridge, sharing nothing with the others but that network (each gets its own empty
folders, too). The root namespace holds the bridge's address and plays the server room:
PostgreSQL and Redis listen on 127.0.0.1 only, so a relay (``relay.py``) offers each on the
bridge's address, which the hosts reach as they would reach another machine.

A host also gets a CPU scheduler share of its own, as a machine has its own scheduler: its
processes run in a session of their own (``setsid``), and the kernel's autogroup scheduling
(``/proc/sys/kernel/sched_autogroup_enabled``) gives every session one fair share of the CPUs
against the others, whatever the processes' niceness inside it. Without that, every host
started here would sit in the starter's session and together get what one process of it gets:
two worker hosts the CPU of one. A host made with ``cpus`` runs on those cores only
(``taskset``): a one-core host is one core, never two. The relays run in a session of their
own too (the network between the hosts and the servers).

Needs root and iproute2 (``ip netns``); ``NetnsUnavailable`` says why when either is missing.
Used by tests/multihost/ and bench/bench_hosts.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent.parent
#: every namespace, bridge and veth made here starts with this, then the creating process's id
PREFIX = "clh"
WEB_PORT = 8000


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, no iproute2, no kernel support)."""


def _ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def require_netns() -> None:
    """Raise ``NetnsUnavailable`` with the reason when this machine cannot make hosts."""
    if os.geteuid() != 0:
        raise NetnsUnavailable("network namespaces need root (run the test as root, as CI does)")
    if shutil.which("ip") is None:
        raise NetnsUnavailable("`ip` not found: install iproute2")
    probe = f"{PREFIX}{os.getpid()}probe"
    try:
        _ip("netns", "add", probe)
    except RuntimeError as exc:
        raise NetnsUnavailable(f"cannot add a network namespace: {exc}") from exc
    with contextlib.suppress(RuntimeError):
        _ip("netns", "del", probe)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers() -> None:
    """Namespaces and bridges a killed earlier run left (its process is gone): a teardown that
    never ran must not make the next run fail."""
    names = [line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()]
    links = [
        line.split(":")[1].strip().split("@")[0]
        for line in _ip("-o", "link", "show").splitlines()
        if line.count(":") >= 2
    ]
    for name in [*names, *links]:
        made_by = re.match(rf"{PREFIX}(\d+)", name)
        if made_by is None or _alive(int(made_by.group(1))):
            continue
        with contextlib.suppress(RuntimeError):
            if name in names:
                _kill_namespace(name)
                _ip("netns", "del", name)
            else:
                _ip("link", "del", name)


def cpu_seconds(pids: Sequence[int], *, children: bool = True) -> float:
    """CPU time used so far by the processes ``pids`` and (``children``) their children that
    ended (user + system; gone ones count 0). The children count on a host of the bench's:
    PostgreSQL's autovacuum workers come and go within a batch (an ANALYZE of the search
    index, a third of a second), their time then in the postmaster's. (Not for the machine's
    PostgreSQL: its postmaster's children are every session's connections.)"""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            # utime, stime (fields 14, 15); cutime, cstime (16, 17)
            total += int(fields[11]) + int(fields[12])
            if children:
                total += int(fields[13]) + int(fields[14])
    return total / os.sysconf("SC_CLK_TCK")


def sched_seconds(pids: Sequence[int]) -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one) of the threads alive now of
    the processes ``pids``, from the scheduler's own accounting (``/proc/PID/task/*/schedstat``;
    threads that ended are not counted)."""
    on_cpu = waiting = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    fields = (task / "schedstat").read_text().split()
                    on_cpu += int(fields[0])
                    waiting += int(fields[1])
    return on_cpu / 1e9, waiting / 1e9


def named(command: str) -> list[int]:
    """Ids of the running processes whose command name is ``command``."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == command:
                found.append(int(entry.name))
    return found


def _namespace_pids(netns: str) -> list[int]:
    try:
        return [int(pid) for pid in _ip("netns", "pids", netns).split()]
    except RuntimeError:
        return []


def _signal_namespace(netns: str, signum: signal.Signals) -> None:
    for pid in _namespace_pids(netns):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def _kill_namespace(netns: str) -> list[int]:
    """SIGKILL every process in ``netns`` (all of them started by this module there)."""
    killed = _namespace_pids(netns)
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return killed


@dataclass
class Host:
    """One machine: a network namespace, its address and the processes started in it."""

    name: str
    netns: str
    address: str
    folder: Path
    #: the cores this host's processes run on (None: any)
    cpus: tuple[int, ...] | None = None
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def exec_prefix(self) -> list[str]:
        """What runs a command on this host: in its network namespace, in a session (and so a
        CPU scheduling group) of its own, on its cores. ``setsid`` execs in place (the process
        started is never a group leader), so a ``Popen`` of it is the host's process."""
        pinned = ["taskset", "-c", ",".join(map(str, self.cpus))] if self.cpus else []
        return ["setsid", "ip", "netns", "exec", self.netns, *pinned]

    def start(self, argv: Sequence[str], env: dict[str, str], log: str) -> subprocess.Popen[bytes]:
        path = self.folder.parent / f"{self.name}-{log}.log"
        with path.open("ab") as out:
            proc = subprocess.Popen(
                [*self.exec_prefix(), *argv],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
        self.procs.append(proc)
        return proc

    def pids(self) -> list[int]:
        return _namespace_pids(self.netns)

    def cpu_seconds(self) -> float:
        """CPU time used so far by this host's processes (user + system)."""
        return cpu_seconds(_namespace_pids(self.netns))

    def log(self, name: str) -> str:
        path = self.folder.parent / f"{self.name}-{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self) -> list[int]:
        """Pull the plug: SIGKILL every process of this host at once, nothing cleans up."""
        killed = _kill_namespace(self.netns)
        self._reap()
        return killed

    def pause(self) -> None:
        """SIGSTOP every process of this host: it holds what it has claimed, does nothing."""
        _signal_namespace(self.netns, signal.SIGSTOP)

    def resume(self) -> None:
        _signal_namespace(self.netns, signal.SIGCONT)

    def stop(self, grace: float = 20) -> None:
        """SIGTERM this host's processes (a warm shutdown), SIGKILL what remains after
        ``grace`` seconds."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        self.kill()

    def _reap(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)


class Network:
    """A bridge and the hosts on it; ``close`` removes everything, also after a failure."""

    def __init__(self, folder: Path) -> None:
        require_netns()
        remove_leftovers()
        self.folder = folder
        self.tag = f"{PREFIX}{os.getpid()}"
        # a /24 of its own per creating process, so two runs at once do not meet
        self.subnet = f"10.213.{os.getpid() % 250 + 1}"
        self.gateway = f"{self.subnet}.1"
        self.bridge = f"{self.tag}br"
        self.hosts: list[Host] = []
        self.relays: list[subprocess.Popen[bytes]] = []
        self.relayed: dict[int, int] = {}
        _ip("link", "add", self.bridge, "type", "bridge")
        try:
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        except Exception:
            self.close()
            raise

    def add_host(self, name: str, cpus: Sequence[int] | None = None) -> Host:
        """A host on the bridge; ``cpus``: the cores it has (None: the machine's)."""
        index = len(self.hosts) + 2
        netns = f"{self.tag}-{name}"
        outside, inside = f"{self.tag}v{index}", f"{self.tag}p{index}"
        host = Host(
            name,
            netns,
            f"{self.subnet}.{index}",
            self.folder / name,
            tuple(cpus) if cpus is not None else None,
        )
        _ip("netns", "add", netns)
        self.hosts.append(host)
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        _ip("link", "set", inside, "netns", netns)
        _ip("link", "set", outside, "master", self.bridge, "up")
        _ip("-n", netns, "addr", "add", f"{host.address}/24", "dev", inside)
        _ip("-n", netns, "link", "set", inside, "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        host.folder.mkdir(parents=True)  # its own, empty
        return host

    def relay(self, port: int, target: tuple[str, int] | None = None) -> str:
        """Offer ``target`` (127.0.0.1:``port``) on the bridge's address; returns host:port."""
        if port not in self.relayed:
            target_host, target_port = target or ("127.0.0.1", port)
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.multihost.relay",
                    self.gateway,
                    str(port),
                    target_host,
                    str(target_port),
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                # the network: not in the share of the process that made it (module docstring)
                start_new_session=True,
            )
            self.relays.append(proc)
            line = proc.stdout.readline() if proc.stdout else b""
            if b"listening" not in line:
                raise RuntimeError(f"relay of port {port} did not start: {line!r}")
            self.relayed[port] = proc.pid
        return f"{self.gateway}:{port}"

    def remote_url(self, url: str) -> str:
        """``url`` (a service on 127.0.0.1) as a host on the bridge reaches it."""
        parts = urlsplit(url)
        address = self.relay(parts.port or {"redis": 6379, "postgres": 5432}[parts.scheme])
        credentials = parts.netloc.rpartition("@")[0]
        netloc = f"{credentials}@{address}" if credentials else address
        return urlunsplit(parts._replace(netloc=netloc))

    def close(self) -> None:
        """Every process on every host killed, the namespaces, the bridge and the relays
        removed; each step is tried even when one before it failed."""
        errors: list[str] = []
        for host in self.hosts:
            try:
                host.kill()
                _ip("netns", "del", host.netns)
            except Exception as exc:
                errors.append(f"{host.name}: {exc}")
        for proc in self.relays:
            proc.kill()
            proc.wait(timeout=10)
            if proc.stdout:
                proc.stdout.close()
        with contextlib.suppress(RuntimeError):  # gone already when creating it failed
            _ip("link", "del", self.bridge)
        if errors:
            raise RuntimeError("could not remove every host: " + "; ".join(errors))


# --- the stack's processes on hosts ----------------------------------------------------------


def host_env(base: dict[str, str], host: Host) -> dict[str, str]:
    """``base`` (services, storage, queue) with this host's own empty folders."""
    return {
        **base,
        "VAR_DIR": str(host.folder / "var"),
        "MEDIA_ROOT": str(host.folder / "media"),
        "WORKER_DIR": str(host.folder / "worker"),
        "SESSION_CACHE_DIR": str(host.folder / "session-cache"),
        "FILE_UPLOAD_TEMP_DIR": str(host.folder / "upload-tmp"),
        "WORKER_HEARTBEAT_FILE": str(host.folder / "worker-heartbeat"),
        "ALLOWED_HOSTS": host.address,
    }


def wait_for(
    what: str,
    ready: Callable[[], bool],
    proc: subprocess.Popen[bytes],
    log: Callable[[], str],
    timeout: float = 90,
) -> None:
    """Wait until ``ready()`` is true; a process that exits first fails with its log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}):\n{log()[-3000:]}")
        if ready():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} not ready after {timeout}s:\n{log()[-3000:]}")


def start_web(host: Host, env: dict[str, str], workers: int = 2) -> str:
    """gunicorn, as the Docker image runs it; returns the site's address once it answers."""
    url = f"http://{host.address}:{WEB_PORT}"
    argv = [
        sys.executable,
        "-m",
        "gunicorn",
        "contextlab.wsgi",
        "--bind",
        f"{host.address}:{WEB_PORT}",
    ]
    proc = host.start(
        [*argv, "--workers", str(workers), "--timeout", "300"], host_env(env, host), "web"
    )

    def answers() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    wait_for(f"web on {host.name}", answers, proc, lambda: host.log("web"))
    return url


def start_worker(
    host: Host,
    env: dict[str, str],
    concurrency: int = 1,
    wait: bool = True,
    queues: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """A Celery worker of ``concurrency`` processes (one: the solo pool), as compose runs it;
    ``wait=False`` returns at once (``wait_worker`` then). ``queues``: the queues it takes
    work from (none given: the default queue)."""
    pool = ["--pool=solo"] if concurrency == 1 else [f"--concurrency={concurrency}"]
    argv = [sys.executable, "-m", "celery", "-A", "contextlab.celery", "worker", *pool]
    argv += [
        "--loglevel=INFO",
        "--without-mingle",
        "--without-gossip",
        f"--hostname={host.name}@%h",
    ]
    if queues:
        argv += ["--queues", ",".join(queues)]
    proc = host.start(argv, host_env(env, host), "worker")
    if wait:
        wait_worker(host, proc)
    return proc


def wait_worker(host: Host, proc: subprocess.Popen[bytes]) -> None:
    wait_for(
        f"worker on {host.name}",
        lambda: "ready." in host.log("worker"),
        proc,
        lambda: host.log("worker"),
    )


def start_beat(host: Host, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The stack's one scheduler (the periodic recovery of runs whose worker died)."""
    argv = [sys.executable, "-m", "celery", "-A", "contextlab.celery", "beat", "--loglevel=INFO"]
    proc = host.start(argv, host_env(env, host), "beat")
    wait_for(
        f"beat on {host.name}",
        lambda: "beat: Starting" in host.log("beat"),
        proc,
        lambda: host.log("beat"),
    )
    return proc


# --- servers of their own on hosts (bench/bench_hosts.py) -------------------------------------

#: the PostgreSQL binaries of the machine's own server
POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
#: the system user PostgreSQL runs as (it refuses root)
POSTGRES_USER = "postgres"


def _accepts(address: str, port: int) -> bool:
    import socket

    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((address, port)) == 0


def start_postgres(host: Host, data: Path) -> str:
    """A PostgreSQL server of its own on ``host`` (the database machine), its cluster made
    fresh in ``data`` (an empty folder the ``postgres`` user may write, outside the root-only
    temporary folders): PostgreSQL's default settings, trust authentication, listening on the
    host's address only. Returns the URL of its ``postgres`` database."""
    import pwd

    user = pwd.getpwnam(POSTGRES_USER)
    os.chown(data, user.pw_uid, user.pw_gid)
    cluster = data / "cluster"
    as_postgres = ["runuser", "-u", POSTGRES_USER, "--"]
    initdb = [str(POSTGRES_BIN / "initdb"), "-D", str(cluster), "-U", "postgres", "--auth=trust"]
    subprocess.run(
        [*as_postgres, *initdb, "-E", "UTF8", "--no-sync"], check=True, capture_output=True
    )
    # the other hosts on the bridge may connect, as the machine's server lets local users
    with (cluster / "pg_hba.conf").open("a") as hba:
        hba.write(f"host all all {host.address.rsplit('.', 1)[0]}.0/24 trust\n")
    argv = [*as_postgres, str(POSTGRES_BIN / "postgres")]
    argv += ["-D", str(cluster), "-k", str(data), "-c", f"listen_addresses={host.address}"]
    proc = host.start(argv, {"PATH": os.environ.get("PATH", "")}, "postgres")
    wait_for(
        f"PostgreSQL on {host.name}",
        lambda: "ready to accept connections" in host.log("postgres"),
        proc,
        lambda: host.log("postgres"),
    )
    return f"postgres://postgres@{host.address}:5432/postgres"


def start_redis(host: Host) -> str:
    """A Redis server of its own on ``host`` (the broker machine), keeping nothing on disk.
    Returns its URL (database 0)."""
    argv = ["redis-server", "--bind", host.address, "--port", "6379", "--save", ""]
    argv += ["--appendonly", "no", "--protected-mode", "no", "--dir", str(host.folder)]
    proc = host.start(argv, {"PATH": os.environ.get("PATH", "")}, "redis")
    wait_for(
        f"Redis on {host.name}",
        lambda: _accepts(host.address, 6379),
        proc,
        lambda: host.log("redis"),
    )
    return f"redis://{host.address}:6379/0"
